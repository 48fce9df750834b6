package hookapi

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// POST /v1/hello hands a well-formed hello to WithHello's function and
// answers 204; a malformed one, or one the function refuses, is a 400
// that says why.
func TestHello(t *testing.T) {
	tests := []struct {
		name, body string
		refuse     bool
		wantCode   int
		wantIn     string
		wantTaken  []Hello
	}{
		{name: "adapter", body: `{"component":"adapter","name":"@pcsync/paperclip-adapter","version":"0.1.0"}`, wantCode: 204,
			wantTaken: []Hello{{"adapter", "@pcsync/paperclip-adapter", "0.1.0"}}},
		{name: "no version", body: `{"component":"plugin","name":"x"}`, wantCode: 400, wantIn: "component and version are required"},
		{name: "wrong type", body: `{"component":1}`, wantCode: 400, wantIn: "component"},
		{name: "refused", body: `{"component":"ui","name":"x","version":"1"}`, refuse: true, wantCode: 400, wantIn: "hello: no such component",
			wantTaken: []Hello{{"ui", "x", "1"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var taken []Hello
			h := New(offlineManager(t), "unused.sock").WithHello(func(c, n, v string) error {
				taken = append(taken, Hello{c, n, v})
				if tt.refuse {
					return errors.New("no such component")
				}
				return nil
			}).Handler()
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/hello", strings.NewReader(tt.body)))
			if rec.Code != tt.wantCode || !strings.Contains(rec.Body.String(), tt.wantIn) {
				t.Errorf("answer %d %q, want %d with %q", rec.Code, rec.Body.String(), tt.wantCode, tt.wantIn)
			}
			if d := cmp.Diff(tt.wantTaken, taken); d != "" {
				t.Errorf("hellos taken (-want +got):\n%s", d)
			}
		})
	}
}

// The adapter and the plugin repeat their hello every 30 s: the daemon
// logs a component's hello at INFO when it is new or its version changed,
// and the repeats at DEBUG only.
func TestHelloLoggedOnChange(t *testing.T) {
	var buf bytes.Buffer
	a := New(offlineManager(t), "unused.sock")
	a.log = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h := a.Handler()
	for _, body := range []string{
		`{"component":"adapter","name":"@pcsync/paperclip-adapter","version":"0.1.0"}`,
		`{"component":"plugin","name":"@pcsync/paperclip-sandbox","version":"0.1.0"}`,
		`{"component":"adapter","name":"@pcsync/paperclip-adapter","version":"0.1.0"}`,
		`{"component":"adapter","name":"@pcsync/paperclip-adapter","version":"0.2.0"}`,
		`{"component":"adapter","name":"@pcsync/paperclip-adapter","version":"0.2.0"}`,
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/hello", strings.NewReader(body)))
		if rec.Code != http.StatusNoContent {
			t.Fatalf("hello %s: %d %s", body, rec.Code, rec.Body.String())
		}
	}
	var levels []string
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		level, _, _ := strings.Cut(strings.TrimPrefix(line[strings.Index(line, "level="):], "level="), " ")
		version := line[strings.LastIndex(line, "version=")+len("version="):]
		levels = append(levels, level+" "+version)
	}
	want := []string{"INFO 0.1.0", "INFO 0.1.0", "DEBUG 0.1.0", "INFO 0.2.0", "DEBUG 0.2.0"}
	if d := cmp.Diff(want, levels); d != "" {
		t.Errorf("hello log levels (-want +got):\n%s\nlog:\n%s", d, buf.String())
	}
}
