package hookapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/rest"

	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/sandbox"
)

// offlineAPI is the API of a manager with no cluster and no config: enough
// for what is answered before the cluster is asked.
func offlineAPI(t testing.TB) http.Handler { return New(offlineManager(t), "unused.sock").Handler() }

// offlineManager is a manager with no config, whose cluster is a port
// nothing listens on (its start finds no pods to adopt) and no warm pools.
func offlineManager(t testing.TB) *sandbox.Manager {
	t.Helper()
	o := sandbox.DefaultOptions(t.TempDir())
	o.Logger = slog.New(slog.DiscardHandler)
	o.Pool.Disabled = true
	m, err := sandbox.New(context.Background(), &rest.Config{Host: "http://127.0.0.1:1"}, func() *config.Model { return nil }, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// post sends params to hook and returns the status and the decoded body.
func post(t *testing.T, h http.Handler, hook, params string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/hooks/"+hook, strings.NewReader(params)))
	return rec.Code, strings.TrimSpace(rec.Body.String())
}

// TestHookBadParams: params that do not decode are a 400 whose message names
// the field at fault; nothing runs.
func TestHookBadParams(t *testing.T) {
	for _, tc := range []struct {
		name, hook, params string
		wantStatus         int
		want               ErrorResponse
	}{
		{"a number for the lease id", "execute", `{"lease":{"providerLeaseId":5},"command":"true"}`, http.StatusBadRequest,
			ErrorResponse{HookError{Code: sandbox.CodeBadRequest, Message: "params.lease.providerLeaseId: want a string, got a JSON number"}}},
		{"no command", "execute", `{"lease":{"providerLeaseId":"pcsync-sbx-1"}}`, http.StatusBadRequest,
			ErrorResponse{HookError{Code: sandbox.CodeBadRequest, Message: "params.command: empty"}}},
		{"a string for cancelActiveWork", "releaseLease", `{"providerLeaseId":"pcsync-sbx-1","cancelActiveWork":"yes"}`, http.StatusBadRequest,
			ErrorResponse{HookError{Code: sandbox.CodeBadRequest, Message: "params.cancelActiveWork: want true or false, got a JSON string"}}},
		{"a string for the config", "acquireLease", `{"config":"acme"}`, http.StatusBadRequest,
			ErrorResponse{HookError{Code: sandbox.CodeBadRequest, Message: "params.config: want an object, got a JSON string"}}},
		{"a number for the run id", "runCancelled", `{"runId":7}`, http.StatusBadRequest,
			ErrorResponse{HookError{Code: sandbox.CodeBadRequest, Message: "params.runId: want a string, got a JSON number"}}},
		{"no run id", "runStarted", `{"config":{"company":"acme"}}`, http.StatusBadRequest,
			ErrorResponse{HookError{Code: sandbox.CodeBadRequest, Message: "params.runId: empty"}}},
		{"no JSON", "resumeLease", `providerLeaseId=x`, http.StatusBadRequest,
			ErrorResponse{HookError{Code: sandbox.CodeBadRequest, Message: "params: not JSON (at byte 1): invalid character 'p' looking for beginning of value"}}},
		{"an unknown hook", "explode", `{}`, http.StatusNotFound,
			ErrorResponse{HookError{Code: sandbox.CodeUnknownHook, Message: `hook "explode" is not served by this pcsync daemon`}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := post(t, offlineAPI(t), tc.hook, tc.params)
			var got ErrorResponse
			if err := json.Unmarshal([]byte(body), &got); err != nil {
				t.Fatalf("answer %s: %v", body, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" || status != tc.wantStatus {
				t.Errorf("status %d, want %d; answer (-want +got):\n%s", status, tc.wantStatus, diff)
			}
		})
	}
}

// TestHookAnswers: the answers keep the wire format the plugin and
// Paperclip read.
func TestHookAnswers(t *testing.T) {
	for _, tc := range []struct {
		name, hook, params string
		wantStatus         int
		want               string
	}{
		{"validate with no config loaded", "validateConfig", `{"config":{"company":"acme","bogus":1}}`, http.StatusOK,
			`{"ok":false,"errors":["config.bogus: unknown field; known fields: provider, company, socketPath, image, leaseTtlSec, timeoutMs, envAllow, prestart"],` +
				`"warnings":["pcsync has no valid config loaded yet: config.company was not checked"]}`},
		{"release of no lease", "releaseLease", `{"providerLeaseId":null}`, http.StatusOK, `null`},
		{"release of a lease the daemon does not hold", "destroyLease", `{"providerLeaseId":"pcsync-sbx-1"}`, http.StatusOK,
			`{"providerLeaseId":"pcsync-sbx-1","state":"destroyed"}`},
		{"workspace of no lease", "realizeWorkspace", `{"lease":{"providerLeaseId":"pcsync-sbx-1"}}`, http.StatusNotFound,
			`{"error":{"message":"lease pcsync-sbx-1: no such lease","code":"no_lease"}}`},
		{"acquire with no config loaded", "acquireLease", `{"config":{"company":"acme"}}`, http.StatusUnprocessableEntity,
			`{"error":{"message":"pcsync has no valid config loaded yet","code":"no_config"}}`},
		{"probe with no config loaded", "probe", `{"config":{"company":"acme"}}`, http.StatusOK,
			`{"ok":false,"summary":"pcsync sandbox not usable: pcsync has no valid config loaded: see the daemon's log and /readyz",` +
				`"diagnostics":[{"severity":"error","code":"no_config","message":"pcsync has no valid config loaded: see the daemon's log and /readyz"}]}`},
		{"cancel of a run with no lease", "runCancelled", `{"runId":"r1"}`, http.StatusOK, `{"released":0}`},
		{"a started run with no config loaded", "runStarted", `{"runId":"r1","config":{"company":"acme"}}`, http.StatusOK,
			`{"prestarted":false,"reason":"pcsync has no valid config loaded yet"}`},
		{"a started run whose config does not parse", "runStarted", `{"runId":"r1","config":{"company":"acme","prestart":"yes"}}`, http.StatusOK,
			`{"prestarted":false,"reason":"config.prestart: want true or false, got \"yes\""}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, got := post(t, offlineAPI(t), tc.hook, tc.params)
			if diff := cmp.Diff(tc.want, got); diff != "" || status != tc.wantStatus {
				t.Errorf("status %d, want %d; answer (-want +got):\n%s", status, tc.wantStatus, diff)
			}
		})
	}
}
