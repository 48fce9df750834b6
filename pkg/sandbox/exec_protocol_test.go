package sandbox

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/rest"
)

// TestExecProtocolSet: the flag takes the three protocols and refuses any
// other word, listing them.
func TestExecProtocolSet(t *testing.T) {
	tests := []struct {
		in      string
		want    ExecProtocol
		wantErr string
	}{
		{"auto", ExecAuto, ""},
		{"websocket", ExecWebSocket, ""},
		{"spdy", ExecSPDY, ""},
		{"SPDY", "", `exec protocol "SPDY": want one of auto, websocket, spdy`},
		{"", "", `exec protocol "": want one of auto, websocket, spdy`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var p ExecProtocol
			err := p.Set(tt.in)
			if got := errString(err); got != tt.wantErr || p != tt.want {
				t.Errorf("Set(%q): %q, %q; want %q, %q", tt.in, p, got, tt.want, tt.wantErr)
			}
		})
	}
	if d := DefaultOptions("").ExecProtocol; d != ExecAuto {
		t.Errorf("default exec protocol %q, want auto", d)
	}
	var o Options
	o.complete()
	if o.ExecProtocol != ExecAuto {
		t.Errorf("completed exec protocol %q, want auto", o.ExecProtocol)
	}
}

// TestExecProtocolExplain: only a refused upgrade with websocket forced
// gets the advice; the error chain is kept.
func TestExecProtocolExplain(t *testing.T) {
	refused := &httpstream.UpgradeFailureError{Cause: errors.New("websocket: bad handshake (403 Forbidden)")}
	other := errors.New("command terminated with exit code 137")
	tests := []struct {
		name   string
		p      ExecProtocol
		err    error
		advice bool
	}{
		{"websocket refused", ExecWebSocket, refused, true},
		{"websocket other", ExecWebSocket, other, false},
		{"auto refused", ExecAuto, refused, false},
		{"spdy other", ExecSPDY, other, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.p.explain(tt.err)
			if !errors.Is(got, tt.err) {
				t.Errorf("explain lost the chain: %v", got)
			}
			if advice := strings.Contains(errString(got), "needs auto or spdy"); advice != tt.advice {
				t.Errorf("explain: %v; advice %v, want %v", got, advice, tt.advice)
			}
		})
	}
}

// TestExecProtocolExecutor: each protocol gives an executor, an unknown one
// an error naming it.
func TestExecProtocolExecutor(t *testing.T) {
	u, _ := url.Parse("https://127.0.0.1:6443/api/v1/namespaces/ns/pods/p/exec")
	cfg := &rest.Config{Host: "https://127.0.0.1:6443"}
	for _, p := range ExecProtocols {
		if _, err := p.executor(cfg, u, nil); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	if _, err := ExecProtocol("quic").executor(cfg, u, nil); err == nil || !strings.Contains(err.Error(), `"quic"`) {
		t.Errorf("quic: %v, want an error naming it", err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestRefusedForGood: 401 and 403, from the API server (a Status) or a
// proxy (a status line), through every wrapping a lease's open adds, end
// the open's retries; an upgrade the server could not do now (503), a
// dropped connection or a closed pipe do not.
func TestRefusedForGood(t *testing.T) {
	wrap := func(err error) error {
		return fmt.Errorf("cmdclient: hello: %w", fmt.Errorf("Pod/ns/p: exec stream ended: %w", err))
	}
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "pods/exec"}, "p", errors.New("RBAC"))
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"RBAC on pods/exec", wrap(forbidden), true},
		{"credentials", wrap(apierrors.NewUnauthorized("token expired")), true},
		{"a Status in a refused upgrade", wrap(&httpstream.UpgradeFailureError{Cause: forbidden}), true},
		{"a proxy's 403", wrap(&httpstream.UpgradeFailureError{Cause: errors.New("websocket: bad handshake (403 Forbidden)")}), true},
		{"a proxy's 401", wrap(&httpstream.UpgradeFailureError{Cause: errors.New("websocket: bad handshake (401 Unauthorized): no")}), true},
		{"an API server starting", wrap(&httpstream.UpgradeFailureError{Cause: errors.New("websocket: bad handshake (503 Service Unavailable)")}), false},
		{"a Status 503", wrap(apierrors.NewServiceUnavailable("starting")), false},
		{"a closed pipe", wrap(io.ErrClosedPipe), false},
		{"a refused connection", wrap(errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := refusedForGood(tt.err); got != tt.want {
				t.Errorf("refusedForGood(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}
