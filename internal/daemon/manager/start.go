package manager

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
)

// errStopped is a controller's failure when it returned nil before it was
// stopped.
var errStopped = errors.New("stopped on its own")

// Start starts the controllers in their order, each once the one before
// it has started, and returns a context that ends when ctx ends or a
// controller fails (its cause is the failure). When one fails to start,
// Start stops those it started and returns the failure, prefixed with the
// controller's name. When ctx ends first, Start returns nil: the caller
// sees the context end, and calls Stop.
func (m *Manager) Start(ctx context.Context) (context.Context, error) {
	if m.ctx != nil {
		return nil, errors.New("controller manager: started twice")
	}
	m.ctx, m.fail = context.WithCancelCause(ctx)
	// Each controller's context is its own, so that Stop can end them one
	// by one; the manager's values pass on.
	base := context.WithoutCancel(ctx)
	for i, c := range m.ctrls {
		m.setHealth(false, "Starting", fmt.Sprintf("starting %s (%d of %d)", c.Name, i+1, len(m.ctrls)))
		r := m.launch(base, c)
		select {
		case <-r.started:
			m.opts.Logger.Info("controller started", slog.String("controller", c.Name))
			continue
		case <-r.done:
		case <-m.ctx.Done():
		}
		if err := m.failure(); err != nil {
			_ = m.Stop()
			return m.ctx, err
		}
		return m.ctx, nil // ctx ended
	}
	if len(m.ctrls) > 0 {
		m.setHealth(true, "Running", strings.Join(m.Names(), ", ")+" running")
	}
	return m.ctx, nil
}

// launch runs c in a goroutine of its own on a child of base.
func (m *Manager) launch(base context.Context, c Controller) *running {
	ctx, cancel := context.WithCancel(base)
	r := &running{Controller: c, cancel: cancel, started: make(chan struct{}), done: make(chan struct{})}
	m.mu.Lock()
	m.running = append(m.running, r)
	m.mu.Unlock()
	var once sync.Once
	started := func() { once.Do(func() { close(r.started) }) }
	go func() {
		defer close(r.done)
		err := c.Run(ctx, started)
		if ctx.Err() != nil {
			// Stopped: what it returns on the way out is no failure.
			if err != nil && !errors.Is(err, context.Canceled) {
				m.opts.Logger.Warn("controller stopped with an error", slog.String("controller", c.Name), slog.Any("error", err))
			}
			return
		}
		m.failed(fmt.Errorf("%s: %w", c.Name, cmpErr(err, errStopped)))
	}()
	return r
}

// failed records the first failure and ends the manager's context.
func (m *Manager) failed(err error) {
	m.mu.Lock()
	first := m.err == nil && !m.stopping
	if first {
		m.err = err
	}
	m.mu.Unlock()
	if !first {
		// The manager stops already: the failure that stopped it, or
		// Stop's, is the one reported.
		m.opts.Logger.Warn("controller ended while the controllers stop", slog.Any("error", err))
		return
	}
	m.opts.Logger.Error("controller failed", slog.Any("error", err))
	m.setHealth(false, "Failed", err.Error())
	m.fail(err)
}

// failure is the first failure, if any.
func (m *Manager) failure() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

// cmpErr is err, else def.
func cmpErr(err, def error) error {
	if err != nil {
		return err
	}
	return def
}
