package manager

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/pcsync/pcsync/pkg/health"
)

// Controller is one part of the daemon that runs beside the others until
// the daemon stops.
type Controller struct {
	// Name names the controller in logs, errors and /readyz.
	Name string
	// Leading: the daemon runs it only while this replica leads; else on
	// every replica, leader or not, from the daemon's start.
	Leading bool
	// Run runs the controller until ctx ends. It calls started once the
	// controllers after it may start (its informers have listed), and
	// returns once every goroutine it started has ended. An error, or a
	// return before ctx ends, fails the manager.
	Run func(ctx context.Context, started func()) error
}

// Background is the Controller of a part whose start returns once it is
// ready, its work going on in the background until ctx ends, and whose
// wait returns once that work has ended (after ctx ended, or after start
// failed).
func Background(name string, start func(ctx context.Context) error, wait func()) Controller {
	return Controller{Name: name, Run: func(ctx context.Context, started func()) error {
		ctx, cancel := context.WithCancel(ctx)
		defer wait()
		defer cancel()
		if err := start(ctx); err != nil {
			return err
		}
		started()
		<-ctx.Done()
		return nil
	}}
}

// Options configure a Manager. Start from DefaultOptions.
type Options struct {
	// Logger receives a line when each controller starts and stops.
	// Default slog.Default().
	Logger *slog.Logger
	// Health, when set, holds the gating condition Condition: false while
	// the controllers start, true once all run, false with the failure
	// when one fails, and while they stop.
	Health *health.Checker
	// Condition is the condition's type. Default "Controllers".
	Condition string
}

// DefaultOptions returns a manager's defaults: no health condition.
func DefaultOptions() Options {
	return Options{Logger: slog.Default(), Condition: "Controllers"}
}

func (o *Options) complete() {
	d := DefaultOptions()
	o.Logger = cmp.Or(o.Logger, d.Logger)
	o.Condition = cmp.Or(o.Condition, d.Condition)
}

// Manager runs the controllers registered with it. Register them, then
// Start once and Stop once.
type Manager struct {
	opts  Options
	ctrls []Controller
	names map[string]bool

	// ctx ends when Start's context does or a controller fails; fail sets
	// its cause.
	ctx  context.Context
	fail context.CancelCauseFunc

	mu      sync.Mutex
	running []*running
	err     error // the first failure
	// stopping: Stop has begun; a controller that ends now is not failing.
	stopping bool
}

// running is a controller Start started.
type running struct {
	Controller
	cancel  context.CancelFunc
	started chan struct{}
	done    chan struct{}
}

// New returns a manager with no controllers.
func New(opts Options) *Manager {
	opts.complete()
	return &Manager{opts: opts, names: map[string]bool{}}
}

// Register adds c after the controllers registered before it. A name is
// registered once.
func (m *Manager) Register(c Controller) error {
	switch {
	case c.Name == "":
		return errors.New("controller manager: a controller without a name")
	case c.Run == nil:
		return fmt.Errorf("controller %s: no Run", c.Name)
	case m.names[c.Name]:
		return fmt.Errorf("controller %s: registered twice", c.Name)
	case m.ctx != nil:
		return fmt.Errorf("controller %s: registered after the start", c.Name)
	}
	m.names[c.Name] = true
	m.ctrls = append(m.ctrls, c)
	return nil
}

// Names returns the registered controllers' names, in their order.
func (m *Manager) Names() []string {
	out := make([]string, len(m.ctrls))
	for i, c := range m.ctrls {
		out[i] = c.Name
	}
	return out
}

// setHealth sets the manager's condition, when it has a checker.
func (m *Manager) setHealth(ok bool, reason, message string) {
	if m.opts.Health != nil {
		m.opts.Health.Set(m.opts.Condition, ok, true, reason, message)
	}
}
