package manager

import (
	"errors"
	"log/slog"
)

// Stop stops the controllers Start started in the reverse order, each
// joined before the one before it is stopped, and returns the first
// failure, if a controller failed. It may be called more than once.
func (m *Manager) Stop() error {
	if m.ctx == nil {
		return errors.New("controller manager: stopped before it started")
	}
	m.mu.Lock()
	rs := m.running
	m.running, m.stopping = nil, true
	m.mu.Unlock()
	if len(rs) > 0 && m.failure() == nil {
		m.setHealth(false, "Stopping", "the daemon stops")
	}
	for i := len(rs) - 1; i >= 0; i-- {
		r := rs[i]
		r.cancel()
		<-r.done
		m.opts.Logger.Info("controller stopped", slog.String("controller", r.Name))
	}
	m.fail(nil)
	return m.failure()
}
