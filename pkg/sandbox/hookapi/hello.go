package hookapi

import (
	"context"
	"io"
	"log/slog"
	"net/http"

	"github.com/pcsync/pcsync/pkg/sandbox"
)

// HelloFunc takes a hello: Paperclip loaded pcsync's component (adapter or
// plugin), the npm package name at version.
type HelloFunc func(component, name, version string) error

// Hello is the body of POST /v1/hello, which pcsync's adapter and plugin
// send when Paperclip loads them.
type Hello struct {
	Component string `json:"component"`
	Name      string `json:"name"`
	Version   string `json:"version"`
}

// WithHello sets what takes the hellos; without it they are logged only.
func (a *API) WithHello(f HelloFunc) *API {
	a.hello = f
	return a
}

// serveHello answers POST /v1/hello with 204, or a 400 naming the field.
func (a *API) serveHello(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 4<<10))
	if err != nil {
		fail(w, http.StatusRequestEntityTooLarge, sandbox.CodeBadRequest, "request body: "+err.Error())
		return
	}
	var h Hello
	if err := decode(body, &h); err != nil {
		refuse(w, err)
		return
	}
	if h.Component == "" || h.Version == "" {
		fail(w, http.StatusBadRequest, sandbox.CodeBadRequest, "hello: component and version are required")
		return
	}
	a.logHello(r.Context(), h)
	if a.hello != nil {
		if err := a.hello(h.Component, h.Name, h.Version); err != nil {
			fail(w, http.StatusBadRequest, sandbox.CodeBadRequest, "hello: "+err.Error())
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// logHello logs a component's hello at INFO when it is the first or names
// another package or version than the last, else at DEBUG: the adapter and
// the plugin repeat theirs every 30 s.
func (a *API) logHello(ctx context.Context, h Hello) {
	level := slog.LevelDebug
	if last, ok := a.seen.Swap(h.Component, h.Name+"@"+h.Version); !ok || last != h.Name+"@"+h.Version {
		level = slog.LevelInfo
	}
	a.log.Log(ctx, level, "Paperclip loaded pcsync's "+h.Component, "package", h.Name, "version", h.Version)
}
