package sandbox

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
)

// ExecProtocol is the protocol of the pod exec that carries a lease's
// command stream (the `--sandbox-exec-protocol` flag of `pcsync daemon`).
type ExecProtocol string

// The exec protocols.
const (
	// ExecAuto tries a WebSocket first and falls back to SPDY when the
	// upgrade to WebSocket fails (an API server before 1.30, where exec over
	// WebSocket is off by default, or a proxy that refuses WebSocket
	// upgrades): client-go's and kubectl's default. The default.
	ExecAuto ExecProtocol = "auto"
	// ExecWebSocket uses a WebSocket only: an exec whose upgrade fails
	// fails.
	ExecWebSocket ExecProtocol = "websocket"
	// ExecSPDY uses SPDY only, never trying a WebSocket: for a proxy or a
	// load balancer in front of the API server that breaks WebSocket
	// upgrades, which auto would try (and be refused) on every open.
	ExecSPDY ExecProtocol = "spdy"
)

// ExecProtocols lists the exec protocols, the default first.
var ExecProtocols = []ExecProtocol{ExecAuto, ExecWebSocket, ExecSPDY}

// ParseExecProtocol returns the exec protocol s names, or an error that
// lists the protocols.
func ParseExecProtocol(s string) (ExecProtocol, error) {
	for _, p := range ExecProtocols {
		if string(p) == s {
			return p, nil
		}
	}
	return "", fmt.Errorf("exec protocol %q: want one of %s", s, execProtocolList())
}

func execProtocolList() string {
	names := make([]string, len(ExecProtocols))
	for i, p := range ExecProtocols {
		names[i] = string(p)
	}
	return strings.Join(names, ", ")
}

// String implements pflag.Value.
func (p *ExecProtocol) String() string { return string(*p) }

// Set implements pflag.Value: it accepts only the names of ExecProtocols.
func (p *ExecProtocol) Set(s string) error {
	v, err := ParseExecProtocol(s)
	if err != nil {
		return err
	}
	*p = v
	return nil
}

// Type implements pflag.Value.
func (p *ExecProtocol) Type() string { return "protocol" }

// executor returns the executor of the exec at u by protocol p; with
// ExecAuto, log hears of each fallback to SPDY.
func (p ExecProtocol) executor(cfg *rest.Config, u *url.URL, log *slog.Logger) (remotecommand.Executor, error) {
	switch p {
	case ExecWebSocket:
		return remotecommand.NewWebSocketExecutor(cfg, "GET", u.String())
	case ExecSPDY:
		return remotecommand.NewSPDYExecutor(cfg, "POST", u)
	case ExecAuto:
		ws, err := remotecommand.NewWebSocketExecutor(cfg, "GET", u.String())
		if err != nil {
			return nil, err
		}
		spdy, err := remotecommand.NewSPDYExecutor(cfg, "POST", u)
		if err != nil {
			return nil, err
		}
		return remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
			fallback := httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
			if fallback {
				log.Debug("sandbox exec: the WebSocket upgrade failed; falling back to SPDY", slog.Any("error", err))
			}
			return fallback
		})
	}
	return nil, fmt.Errorf("exec protocol %q: want one of %s", p, execProtocolList())
}

// explain adds to an exec's error what an operator can do about it: a
// WebSocket upgrade that failed with no SPDY to fall back to.
func (p ExecProtocol) explain(err error) error {
	if p == ExecWebSocket && (httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)) {
		return fmt.Errorf("%w (the exec protocol is websocket, with no fallback to SPDY: "+
			"an API server before 1.30 or a proxy that refuses WebSocket upgrades needs auto or spdy)", err)
	}
	return err
}

// refusedForGood says err is an exec refused with 401 or 403, by the API
// server (credentials, RBAC on pods/exec) or by a proxy in front of it (one
// that refuses WebSocket upgrades, with the protocol forced to websocket):
// opening again does not help until an operator acts.
func refusedForGood(err error) bool {
	if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
		return true
	}
	var uf *httpstream.UpgradeFailureError
	if !errors.As(err, &uf) || uf.Cause == nil {
		return false
	}
	if apierrors.IsForbidden(uf.Cause) || apierrors.IsUnauthorized(uf.Cause) {
		return true
	}
	// A refusal that is no Kubernetes Status: client-go adds the
	// response's status line to the handshake's error.
	msg := uf.Cause.Error()
	return strings.Contains(msg, "("+strconv.Itoa(http.StatusForbidden)+" ") || strings.Contains(msg, "("+strconv.Itoa(http.StatusUnauthorized)+" ")
}
