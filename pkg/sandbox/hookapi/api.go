package hookapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/pcsync/pcsync/pkg/sandbox"
)

// API serves the hooks of pcsync's Paperclip plugin
// (integrations/paperclip-sandbox) on a Unix socket: POST /v1/hooks/<hook>
// with the hook's params as Paperclip passes them (the request types of
// hook.go), answered with the hook's result (the response types);
// runCancelled ({runId}) ends a cancelled run's leases. The workspace
// sync's bytes have routes of their own (sync.go): POST /v1/sync/put
// and /v1/sync/get. execute answers
// NDJSON: ExecuteLine chunks while the command runs, then one result or
// error line. Params that do not decode are a 400 naming the field; any
// other refusal is a non-2xx status with an ErrorResponse. Nothing of a
// request is logged but ids and key names. The API only speaks HTTP: the
// sandbox.Manager does the work.
type API struct {
	m      *sandbox.Manager
	socket string
	log    *slog.Logger
	hello  HelloFunc
	// seen is the package and version of each component's last hello.
	seen sync.Map
}

// New returns the API of m on socket (created with mode 0600); it logs to
// m's logger.
func New(m *sandbox.Manager, socket string) *API {
	return &API{m: m, socket: socket, log: m.Logger()}
}

// Serve listens until ctx ends, then stops accepting and returns once the
// requests in flight are done (executes are cut off after 5 s).
func (a *API) Serve(ctx context.Context) error {
	if err := os.MkdirAll(filepath.Dir(a.socket), 0o700); err != nil {
		return fmt.Errorf("sandbox API: %w", err)
	}
	if err := os.Remove(a.socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("sandbox API: remove stale socket: %w", err)
	}
	ln, err := net.Listen("unix", a.socket)
	if err != nil {
		return fmt.Errorf("sandbox API: %w", err)
	}
	if err := os.Chmod(a.socket, 0o600); err != nil {
		_ = ln.Close()
		return fmt.Errorf("sandbox API: %w", err)
	}
	srv := &http.Server{Handler: a.Handler(), ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	a.log.Info("sandbox API listening", slog.String("socket", a.socket))
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("sandbox API: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	_ = os.Remove(a.socket)
	return nil
}

// Handler returns the API's HTTP handler.
func (a *API) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/hooks/{hook}", a.hook)
	mux.HandleFunc("POST /v1/sync/put", a.syncPut)
	mux.HandleFunc("POST /v1/sync/get", a.syncGet)
	mux.HandleFunc("POST /v1/hello", a.serveHello)
	return mux
}

// hookFunc serves one hook whose params are body.
type hookFunc func(a *API, w http.ResponseWriter, r *http.Request, body []byte)

// hooks are the hooks the API serves.
var hooks = map[Hook]hookFunc{
	HookValidateConfig:   answer((*API).validateConfig),
	HookProbe:            answer((*API).probe),
	HookAcquireLease:     answer((*API).acquireLease),
	HookResumeLease:      answer((*API).resumeLease),
	HookReleaseLease:     answer((*API).releaseLease),
	HookDestroyLease:     answer((*API).destroyLease),
	HookRealizeWorkspace: answer((*API).realizeWorkspace),
	HookExecute:          (*API).execute,
	HookRunCancelled:     answer((*API).runCancelled),
	HookRunStarted:       answer((*API).runStarted),
}

func (a *API) hook(w http.ResponseWriter, r *http.Request) {
	name := Hook(r.PathValue("hook"))
	serve, ok := hooks[name]
	if !ok {
		fail(w, http.StatusNotFound, sandbox.CodeUnknownHook, fmt.Sprintf("hook %q is not served by this pcsync daemon", name))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<20))
	if err != nil {
		fail(w, http.StatusRequestEntityTooLarge, sandbox.CodeBadRequest, "request body: "+err.Error())
		return
	}
	serve(a, w, r, body)
}

// answer serves a hook whose answer is one JSON value: it decodes the
// params into a Req (a 400 naming the field when they do not decode),
// calls the hook and replies with its answer or its refusal.
func answer[Req, Resp any](call func(a *API, ctx context.Context, req *Req) (Resp, error)) hookFunc {
	return func(a *API, w http.ResponseWriter, r *http.Request, body []byte) {
		var req Req
		if err := decode(body, &req); err != nil {
			refuse(w, err)
			return
		}
		resp, err := call(a, r.Context(), &req)
		if err != nil {
			refuse(w, err)
			return
		}
		reply(w, resp)
	}
}

// refuse answers err: a bad request 400, a sandbox.UserError 422 with its code, an
// unknown lease 404, anything else 500.
func refuse(w http.ResponseWriter, err error) {
	var ue *sandbox.UserError
	var be *sandbox.BadRequestError
	switch {
	case errors.As(err, &be):
		fail(w, http.StatusBadRequest, sandbox.CodeBadRequest, be.Error())
	case errors.As(err, &ue):
		fail(w, http.StatusUnprocessableEntity, ue.Code, ue.Message)
	case errors.Is(err, sandbox.ErrNoLease):
		fail(w, http.StatusNotFound, sandbox.CodeNoLease, err.Error())
	default:
		fail(w, http.StatusInternalServerError, sandbox.CodeInternal, err.Error())
	}
}

func fail(w http.ResponseWriter, status int, code sandbox.Code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(ErrorResponse{Error: HookError{Message: msg, Code: code}})
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
