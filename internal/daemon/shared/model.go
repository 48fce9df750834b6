package shared

import (
	"time"

	"github.com/pcsync/pcsync/pkg/config"
)

// SetModel takes the proxies' idle periods of a config the daemon loaded:
// a company in egress mode proxy has its spec.egress.proxyIdleSec (else
// the Settings'), and one with a warm pool none (its proxy stays up; a
// suspended company's pool is drained). The
// scaler looks at every proxy again.
func (s *Shared) SetModel(m *config.Model) {
	idle := make(map[string]time.Duration, len(m.Companies))
	for i := range m.Companies {
		c := &m.Companies[i]
		if m.EgressMode(c) != config.EgressProxy {
			continue
		}
		idle[m.Namespace(c)] = m.ProxyIdle(c)
		if c.Spec.Sandbox != nil && len(c.Spec.Sandbox.WarmPool) > 0 && !c.Suspended() {
			idle[m.Namespace(c)] = 0
		}
	}
	s.idle.Store(&idle)
	s.scale.Resync()
}

// idleFor is the scaler's IdleFunc: false for a namespace that is no
// company's in egress mode proxy (its proxy is left alone), and for every
// namespace before a config is loaded.
func (s *Shared) idleFor(ns string) (time.Duration, bool) {
	idle := s.idle.Load()
	if idle == nil {
		return 0, false
	}
	d, ok := (*idle)[ns]
	return d, ok
}
