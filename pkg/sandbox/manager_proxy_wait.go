package sandbox

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/procinit"
	"github.com/pcsync/pcsync/pkg/sandbox/cmdclient"
)

// proxyWait bounds the wait for a proxy scaled up from zero.
const proxyWait = 3 * time.Minute

// proxyGrace bounds the wait of a new pod for a proxy that is up: an
// enforcer programs a new pod's rules from its event, a moment after the
// pod starts, and the lease's first request must not meet a refusal.
const proxyGrace = 3 * time.Second

// proxyState tells the proxy scaler (Options.ProxyScale) of a lease about
// to start in namespace ns of company c. proxied: the company's egress
// goes through its proxy; cold: the proxy has no available pod yet
// (scaled to zero while idle), and the lease waits for it before its
// acquire returns (waitProxy).
func (m *Manager) proxyState(model *config.Model, company, ns string) (proxied, cold bool) {
	if m.opts.ProxyAddresses == nil {
		return false, false
	}
	c, ok := model.Company(company)
	if !ok || model.EgressMode(c) != config.EgressProxy {
		return false, false
	}
	return true, m.opts.ProxyScale != nil && !m.opts.ProxyScale.Need(ns)
}

// waitProxy waits, from inside lease l's pod, until its company's egress
// proxy accepts a connection: `pcsync init --wait-proxy` by the pod's own
// pcsync, on the path the lease's commands take (the Service's address,
// through the pod's NetworkPolicy), so that the first request of the
// lease's first execute does not fail; with grace (a proxy that is up, a
// new pod), `--proxy-grace`: until its first answer, or the grace's end
// without one. A pod whose pcsync cannot run the wait (an older one) is
// logged and not waited for. Where pods share the host (Options.HostRoot),
// the proxy's Deployment is waited for instead, and a grace not at all.
func (m *Manager) waitProxy(ctx context.Context, l *lease, grace bool) error {
	began := time.Now()
	if m.opts.HostRoot != "" && grace {
		return nil
	}
	if m.opts.HostRoot != "" {
		// Pods that share the host (kwok) have no network of their own:
		// the proxy's Deployment says when it is up.
		wctx, cancel := context.WithTimeout(ctx, proxyWait)
		defer cancel()
		if err := m.opts.ProxyScale.Ready(wctx, l.Namespace); err != nil {
			return userErrorf(CodeProxyUnavailable, "lease %s: %v", l.ID, err)
		}
		return nil
	}
	var stderr bytes.Buffer
	cmd := cmdclient.Command{
		Argv:    []string{cmp.Or(l.Server, m.opts.ServerPath), "init", "--wait-proxy", "--record", "-", "--", "true"},
		Env:     map[string]string{},
		BaseEnv: true,
		Timeout: proxyWait + 10*time.Second,
		Stderr:  &stderr,
	}
	if grace {
		cmd.Argv = slices.Replace(cmd.Argv, 2, 3, "--proxy-grace", proxyGrace.String())
	}
	var exit cmdclient.Exit
	err := m.inUse(ctx, l, func(l *lease, c *cmdclient.Client) error {
		if err := m.addProxyEnv(ctx, l, &cmd); err != nil {
			return err
		}
		var err error
		exit, err = c.Exec(ctx, cmd)
		return err
	})
	switch {
	case err != nil:
		return fmt.Errorf("lease %s: waiting for the egress proxy: %w", l.ID, err)
	case exit.Code == procinit.ExitProxyUnavailable:
		return userErrorf(CodeProxyUnavailable, "lease %s: %s", l.ID, strings.TrimSpace(stderr.String()))
	case exit.Code != 0 || exit.Error != "":
		m.log.Warn("sandbox lease: the pod's pcsync could not wait for the egress proxy; its first request may fail",
			slog.String("lease", l.ID), slog.Int("exit", exit.Code), slog.String("error", cmp.Or(exit.Error, strings.TrimSpace(stderr.String()))))
		return nil
	}
	m.log.Info("sandbox lease: egress proxy up", slog.String("lease", l.ID), slog.Duration("waited", time.Since(began).Round(time.Millisecond)))
	return nil
}
