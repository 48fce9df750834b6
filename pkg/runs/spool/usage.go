package spool

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"sync"
	"time"

	"github.com/pcsync/pcsync/internal/lib/safefile"
	"github.com/pcsync/pcsync/pkg/result"
	"github.com/pcsync/pcsync/pkg/runs"
)

// usageStore keeps the last cumulative usage total per session, for CLIs
// that report session totals (Codex reports thread totals): the adapter's
// parser turns this run's total into per-run figures when it is given the
// previous one, and reports usageBasis session_cumulative when not.
type usageStore struct {
	layout runs.Layout
	mu     sync.Mutex
}

// sessionTotal is <state>/usage/<adapter>/<session>.json.
type sessionTotal struct {
	SessionID string       `json:"sessionId"`
	Total     result.Usage `json:"total"`
	RunID     string       `json:"runId"`
	UpdatedAt time.Time    `json:"updatedAt"`
}

var safeSessionID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

func (s *usageStore) path(adapter, session string) string {
	name := session
	if !safeSessionID.MatchString(session) {
		sum := sha256.Sum256([]byte(session))
		name = "sha256-" + hex.EncodeToString(sum[:])
	}
	return filepath.Join(s.layout.UsageDir(adapter), name+".json")
}

// previous returns the session's last kept total, or nil.
func (s *usageStore) previous(adapter, session string) (*result.Usage, error) {
	if session == "" {
		return nil, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.path(adapter, session)
	var t sessionTotal
	ok, err := safefile.ReadJSON(p, runs.MaxStateBytes, &t)
	if err != nil {
		return nil, fmt.Errorf("usage store: %w", err)
	}
	if !ok {
		return nil, nil
	}
	return &t.Total, nil
}

// record keeps a session's total after a run.
func (s *usageStore) record(adapter, session, runID string, total result.Usage) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.path(adapter, session)
	if err := safefile.MkdirAll(filepath.Dir(p)); err != nil {
		return fmt.Errorf("usage store: %w", err)
	}
	data, err := json.Marshal(sessionTotal{SessionID: session, Total: total, RunID: runID, UpdatedAt: time.Now().UTC()})
	if err != nil {
		return fmt.Errorf("usage store: %w", err)
	}
	return safefile.WriteAtomic(p, append(data, '\n'), 0o600, true)
}
