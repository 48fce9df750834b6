package daemon

import (
	"context"
	"sync/atomic"

	"github.com/pcsync/pcsync/internal/daemon/manager"
	"github.com/pcsync/pcsync/pkg/companystatus/statusctl"
	"github.com/pcsync/pcsync/pkg/health"
	"github.com/pcsync/pcsync/pkg/reconcile"
	"github.com/pcsync/pcsync/pkg/runs/spool"
)

// manager returns a manager of the Options.Controllers that are leading
// (or not), reporting on h (nil: no condition).
func (d *daemon) manager(leading bool, h *health.Checker) (*manager.Manager, error) {
	m := manager.New(manager.Options{Logger: d.log, Health: h, Condition: CondControllers})
	for _, c := range d.opts.Controllers {
		if c.Leading != leading {
			continue
		}
		if err := m.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// registerLoops registers the loops that run while this replica leads,
// after its Leading controllers: the company status controller (st, when
// not nil), the reconcile loop, then the sandbox and the runs loop, which
// each wait for its first valid config.
func (d *daemon) registerLoops(m *manager.Manager, loop *reconcile.Loop, st *statusctl.Controller,
	server *atomic.Pointer[spool.Server], changed <-chan struct{}) error {
	var loops []manager.Controller
	if st != nil {
		loops = append(loops, manager.Background("company-status", st.Run, st.Wait))
	}
	loops = append(loops, manager.Controller{Name: "reconcile", Run: func(ctx context.Context, started func()) error {
		started()
		return loop.Run(ctx)
	}})
	if d.opts.Sandbox != nil {
		loops = append(loops, manager.Controller{Name: "sandbox", Run: func(ctx context.Context, started func()) error {
			started()
			return d.runSandbox(ctx, loop, changed)
		}})
	}
	if d.opts.Runs != nil {
		loops = append(loops, manager.Controller{Name: "runs", Run: func(ctx context.Context, started func()) error {
			started()
			return d.serveRuns(ctx, loop, server)
		}})
	}
	for _, c := range loops {
		if err := m.Register(c); err != nil {
			return err
		}
	}
	return nil
}
