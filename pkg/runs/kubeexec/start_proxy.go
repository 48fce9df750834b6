package kubeexec

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/pcsync/pcsync/pkg/result"
	"github.com/pcsync/pcsync/pkg/runs"
)

// proxyWait bounds the wait for an egress proxy scaled up from zero.
const proxyWait = 3 * time.Minute

// proxyReady waits, for a run whose proxy was scaled to zero
// (Input.WaitProxy) and whose image has no pcsync init to wait in the pod,
// until the proxy has an available pod, so that the CLI's first request
// does not fail; the Job is created after. A run in pcsync's images waits
// in its pod instead, while the pod starts.
func (s *start) proxyReady(ctx context.Context) error {
	if !s.in.WaitProxy || s.in.Model.ImageHasServer(s.in.Model.AgentImage(s.in.Agent)) {
		return nil
	}
	began := time.Now()
	wctx, cancel := context.WithTimeout(ctx, proxyWait)
	defer cancel()
	if err := s.e.opts.ProxyScale.Ready(wctx, s.ns); err != nil {
		return &runs.StartError{Code: result.ErrUpstreamUnavailable,
			Err: fmt.Errorf("no Job created: the company's egress proxy, scaled up from zero for the run, has no available pod after %s: %w", proxyWait, err)}
	}
	s.log.Info("egress proxy up before the Job (the agent's image has no pcsync init to wait in)",
		slog.Duration("waited", time.Since(began).Round(time.Millisecond)))
	return nil
}
