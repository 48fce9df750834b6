package sandbox

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"sync"

	"github.com/pcsync/pcsync/internal/lib/safefile"
	"github.com/pcsync/pcsync/pkg/sandbox/leasepod"
)

// journalFile is the lease journal's name in the state directory.
const journalFile = "sandbox-leases.json"

// journal records every live lease in one file, rewritten atomically and
// durably (temp file, fsync, rename) on each change: before a pod is
// created, once its UID is known, and when it is gone. A daemon that starts
// reads it to adopt the pods of live leases and delete those past their
// expiry. Leases are few and long-lived (one per agent run), so one small
// file beats the run journal's append log here.
type journal struct {
	path string
	mu   sync.Mutex
	recs map[string]leasepod.Record
}

func openJournal(stateDir string) (*journal, error) {
	if err := safefile.MkdirAll(stateDir); err != nil {
		return nil, fmt.Errorf("lease journal: %w", err)
	}
	j := &journal{path: filepath.Join(stateDir, journalFile), recs: map[string]leasepod.Record{}}
	var list []leasepod.Record
	if _, err := safefile.ReadJSON(j.path, 16<<20, &list); err != nil {
		return nil, fmt.Errorf("lease journal %s: %w", j.path, err)
	}
	for _, l := range list {
		j.recs[l.ID] = l
	}
	return j, nil
}

// leases returns the recorded leases, sorted by id.
func (j *journal) leases() []leasepod.Record {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make([]leasepod.Record, 0, len(j.recs))
	for _, l := range j.recs {
		out = append(out, l)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return out
}

// put records r durably.
func (j *journal) put(r leasepod.Record) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.recs[r.ID] = r
	return j.writeLocked()
}

// drop forgets the lease.
func (j *journal) drop(id string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, ok := j.recs[id]; !ok {
		return nil
	}
	delete(j.recs, id)
	return j.writeLocked()
}

func (j *journal) writeLocked() error {
	list := make([]leasepod.Record, 0, len(j.recs))
	for _, l := range j.recs {
		list = append(list, l)
	}
	sort.Slice(list, func(a, b int) bool { return list[a].ID < list[b].ID })
	data, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return err
	}
	if err := safefile.WriteAtomic(j.path, append(data, '\n'), 0o600, true); err != nil {
		return fmt.Errorf("lease journal %s: %w", j.path, err)
	}
	return nil
}
