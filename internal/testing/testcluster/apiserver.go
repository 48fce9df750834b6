package testcluster

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrNotStarted is returned by StopAPIServer and StartAPIServer for a cluster this
// process did not start (Attach): its processes are not this process's to stop.
var ErrNotStarted = errors.New("testcluster: the cluster was not started by this process (Attach)")

// apiserver returns the kube-apiserver component, nil if there is none.
func (c *Cluster) apiserver() *component {
	c.compsMu.Lock()
	defer c.compsMu.Unlock()
	for _, comp := range c.comps {
		if comp.name == "kube-apiserver" {
			return comp
		}
	}
	return nil
}

// StopAPIServer stops kube-apiserver alone, as an operator or an upgrade does: SIGTERM,
// and SIGKILL if it has not exited after Options.StopGrace (it closes its listener at
// once but drains long-running requests, such as followed pod logs, first). It returns
// once the process has exited. etcd and the other components go on; every client, the
// controllers and kwok included, finds nothing listening on the API server's port.
// StartAPIServer starts it again on the same port, with the same certificates and etcd
// data. Stopping a stopped API server does nothing.
func (c *Cluster) StopAPIServer() error {
	return c.stopAPIServer(false)
}

// KillAPIServer stops kube-apiserver with SIGKILL, as a crash or a lost machine does:
// every connection to it breaks at once, with no graceful end of watches or streams.
// Otherwise as StopAPIServer.
func (c *Cluster) KillAPIServer() error {
	return c.stopAPIServer(true)
}

func (c *Cluster) stopAPIServer(kill bool) error {
	if len(c.apiArgs) == 0 {
		return ErrNotStarted
	}
	comp := c.apiserver()
	if comp == nil {
		return fmt.Errorf("testcluster: stop kube-apiserver: no such component")
	}
	var err error
	if kill {
		err = comp.kill()
	} else if err = comp.stop(c.opts.StopGrace); err != nil && comp.exited() {
		err = nil // killed after the grace period: stopped all the same
	}
	if err != nil {
		return fmt.Errorf("testcluster: stop kube-apiserver: %w", err)
	}
	c.opts.Logf("testcluster: stopped kube-apiserver (pid %d, SIGKILL %v)", comp.cmd.Process.Pid, kill)
	return nil
}

// StartAPIServer starts the kube-apiserver that StopAPIServer stopped, with the
// same command line (port, certificates, etcd, audit log appended to), and returns
// once its /readyz answers. ctx bounds the wait (Options.StartTimeout at most). It
// does nothing if the API server runs.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	if len(c.apiArgs) == 0 {
		return ErrNotStarted
	}
	old := c.apiserver()
	if old != nil && !old.exited() {
		return nil
	}
	begin := time.Now()
	comp, err := startComponent("kube-apiserver", c.bin("kube-apiserver"), c.apiArgs, c.path("logs"), nil)
	if err != nil {
		return fmt.Errorf("testcluster: %w", err)
	}
	c.compsMu.Lock()
	replaced := false
	for i, x := range c.comps {
		if x == old {
			c.comps[i], replaced = comp, true
		}
	}
	if !replaced {
		c.comps = append(c.comps, comp)
	}
	c.compsMu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, c.opts.StartTimeout)
	defer cancel()
	if err := c.waitReadyz(ctx, comp); err != nil {
		return fmt.Errorf("testcluster: restart: %w", comp.failure(err))
	}
	c.opts.Logf("testcluster: kube-apiserver (pid %d) ready again after %s", comp.cmd.Process.Pid,
		time.Since(begin).Round(time.Millisecond))
	return nil
}
