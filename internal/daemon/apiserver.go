package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"k8s.io/client-go/rest"
)

// CondAPIServerReachable (not gating) is false while the Kubernetes API
// server does not answer its /readyz: reason Unreachable, message "API server
// unreachable: …". Runs in flight and the reconcile loop wait it out (their
// Jobs go on in the cluster; watches and log streams resume where they were,
// a failed apply is retried); the condition clears at the first answer.
const CondAPIServerReachable = "APIServerReachable"

// DefaultAPIServerProbeInterval is the time between two probes of the API
// server: the kubelet's readiness probe period (deploy/base asks /readyz
// every 10 s). The probe is the daemon's one request at rest beside its
// watches: 6 a minute.
const DefaultAPIServerProbeInterval = 10 * time.Second

// minProbeTimeout is the least time a probe waits for its answer: a busy
// API server on a busy machine is slow, not unreachable.
const minProbeTimeout = 5 * time.Second

// probeAPIServer asks the API server's /readyz every interval (each request
// bounded by the interval, at least minProbeTimeout) until ctx ends, and keeps CondAPIServerReachable
// and the log in step with the answers: one WARN when the server goes away,
// one INFO when it answers again.
func (d *daemon) probeAPIServer(ctx context.Context, rc rest.Interface, interval time.Duration) {
	reachable := true // until a probe says otherwise; logged only on a change
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, max(interval, minProbeTimeout))
		body, err := rc.Get().AbsPath("/readyz").DoRaw(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			msg := "API server unreachable: GET /readyz: " + probeError(err, body)
			d.opts.Health.Set(CondAPIServerReachable, false, false, "Unreachable", msg)
			if reachable {
				d.log.Warn("API server unreachable; runs and reconciles wait for it", slog.Any("error", err))
			}
			reachable = false
		} else {
			d.opts.Health.Set(CondAPIServerReachable, true, false, "Reachable", "the API server answers /readyz")
			if !reachable {
				d.log.Info("API server reachable again; reconciling now")
				// A reconcile that failed meanwhile need not wait for
				// its backoff.
				if l := d.loop.Load(); l != nil {
					l.Trigger()
				}
			}
			reachable = true
		}
		t.Reset(interval)
	}
}

// probeError is the error of a failed probe, with the first line of the
// server's answer when it gave one (a /readyz that fails lists its checks).
func probeError(err error, body []byte) string {
	s := err.Error()
	if b := strings.TrimSpace(string(body)); b != "" && !strings.Contains(s, b) {
		if i := strings.IndexByte(b, '\n'); i >= 0 {
			b = b[:i]
		}
		s = fmt.Sprintf("%s (%s)", s, b)
	}
	return s
}
