package kubeexec

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/pcsync/pcsync/internal/lib/safefile"
)

// JournalFile is the executor's journal in the daemon's state directory.
const JournalFile = "kubernetes-runs.jsonl"

// journalOp is what a journal record says.
type journalOp string

const (
	// opStart: the run's Job is about to be created; the record holds
	// its marker.
	opStart journalOp = "start"
	// opCreated: the API server answered the creates of the Job and its
	// Secret; the record holds the Job's UID.
	opCreated journalOp = "created"
	// opEnd: the run's result is written; its marker is dropped.
	opEnd journalOp = "end"
)

// journalRecord is one line of the journal.
type journalRecord struct {
	Op   journalOp `json:"op"`
	Name string    `json:"name"`
	// Marker is set on opStart.
	Marker *marker `json:"marker,omitempty"`
	// UID is the Job's UID, set on opCreated (absent in the created
	// records of a pcsync older than the UID check).
	UID types.UID `json:"uid,omitempty"`
}

// compactAfter is how many superseded records the journal holds before it
// is rewritten with only its live markers (and more than it has live ones).
const compactAfter = 4096

// journal is the durable record of the runs whose Jobs the executor
// creates: one append-only file of JSON lines under the state directory.
// A run's start record is on disk (written and fdatasync'd) before its Job
// is created, so a daemon that stops at any point knows which runs it may
// have started. Records of runs that start together share one write and
// one fdatasync (group commit): the caller that finds no write in progress
// writes every record queued meanwhile, and the others wait for it. Safe
// for concurrent use.
type journal struct {
	path string
	log  *slog.Logger
	// lock is the journal's lock file, held (flock) while it is open: one
	// executor per state directory.
	lock *safefile.Lock
	// compactAfter is compactAfter, smaller in tests.
	compactAfter int

	mu sync.Mutex
	f  *os.File
	// size is the length of the file's complete records: a failed write
	// is cut back to it.
	size int64
	// live holds the marker of every run started and not ended, by run
	// name.
	live map[string]marker
	// dead counts records superseded by later ones.
	dead int
	// flushing is set while a caller writes a batch; queued is the batch
	// the next write takes.
	flushing bool
	queued   *journalBatch
}

// journalBatch is records written together and the callers waiting on them.
type journalBatch struct {
	data []byte
	done chan struct{}
	err  error
}

// openJournal opens (or creates) the journal of stateDir, reads its live
// markers, takes in the per-run marker files older versions of pcsync
// wrote (<state>/runs/<name>/kubernetes.json), and rewrites it compactly.
func openJournal(stateDir string, log *slog.Logger) (*journal, error) {
	if err := safefile.MkdirAll(stateDir); err != nil {
		return nil, fmt.Errorf("run journal: %w", err)
	}
	j := &journal{path: filepath.Join(stateDir, JournalFile), log: log, compactAfter: compactAfter, live: map[string]marker{}}
	lock, err := lockFile(j.path + ".lock")
	if err != nil {
		return nil, err
	}
	j.lock = lock
	fail := func(err error) (*journal, error) {
		j.close()
		return nil, err
	}
	if err := j.replay(); err != nil {
		return fail(err)
	}
	legacy, err := j.importLegacy(stateDir)
	if err != nil {
		return fail(err)
	}
	j.dropFinished()
	if err := j.compactLocked(); err != nil {
		return fail(err)
	}
	// The per-run files are in the journal now, on disk.
	for _, p := range legacy {
		if err := removeLegacyMarker(p); err != nil {
			log.Warn("cannot remove a per-run marker taken into the run journal", slog.Any("error", err))
		}
	}
	return j, nil
}

// lockWait is how long lockFile waits for the lock: an executor of the
// same process that is stopping gives it up in a moment.
const lockWait = 5 * time.Second

// lockFile takes an exclusive flock on path (created 0600), waiting up to
// lockWait, or fails saying that another executor holds it.
func lockFile(path string) (*safefile.Lock, error) {
	l, err := safefile.LockWait(path, 0o600, lockWait, 50*time.Millisecond)
	if errors.Is(err, safefile.ErrLocked) {
		return nil, fmt.Errorf("run journal: another daemon uses this state directory (%s is locked)", path)
	}
	if err != nil {
		return nil, fmt.Errorf("run journal: %w", err)
	}
	return l, nil
}

// dropFinished forgets the markers of runs whose result file exists: the
// daemon that wrote the result stopped before it ended the run's record.
func (j *journal) dropFinished() {
	for name, m := range j.live {
		if m.Result == "" {
			continue
		}
		if ok, err := safefile.Check(m.Result); ok && err == nil {
			delete(j.live, name)
			j.dead++
		}
	}
}

// replay reads the journal's records into live. A line that does not
// decode is skipped with a warning: the last one may be cut short by a
// crash (its write was never acknowledged, so its Job was never created).
func (j *journal) replay() error {
	f, _, err := safefile.Open(j.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("run journal: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		var rec journalRecord
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil || rec.Name == "" || (rec.Op == opStart && rec.Marker == nil) {
			j.log.Warn("run journal: skipping a record that does not decode (cut short by a crash?)",
				slog.String("file", j.path), slog.Int("line", line))
			continue
		}
		j.applyLocked(rec)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("run journal: %s: %w", j.path, err)
	}
	return nil
}

// applyLocked takes a record into live.
func (j *journal) applyLocked(rec journalRecord) {
	if _, ok := j.live[rec.Name]; ok {
		j.dead++
	}
	switch rec.Op {
	case opStart:
		j.live[rec.Name] = *rec.Marker
	case opCreated:
		if m, ok := j.live[rec.Name]; ok {
			m.Created = true
			if rec.UID != "" {
				m.UID = rec.UID
			}
			j.live[rec.Name] = m
		}
	case opEnd:
		delete(j.live, rec.Name)
		j.dead++
	}
}

// importLegacy takes in the per-run marker files of older versions and
// returns their paths.
func (j *journal) importLegacy(stateDir string) ([]string, error) {
	paths, err := filepath.Glob(filepath.Join(stateDir, "runs", "*", markerFile))
	if err != nil {
		return nil, fmt.Errorf("run journal: %w", err)
	}
	var taken []string
	for _, p := range paths {
		var m marker
		ok, err := safefile.ReadJSON(p, maxMarkerBytes, &m)
		if err != nil {
			j.log.Warn("run journal: skipping a per-run marker that cannot be read", slog.Any("error", err))
			continue
		}
		if !ok {
			continue
		}
		name := filepath.Base(filepath.Dir(p))
		if _, have := j.live[name]; !have {
			j.live[name] = m
		}
		taken = append(taken, p)
	}
	return taken, nil
}

// get returns the marker of a run; ok is false when it has none.
func (j *journal) get(name string) (m marker, ok bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	m, ok = j.live[name]
	return m, ok
}

// start records the run's marker and returns once it is on disk.
func (j *journal) start(name string, m marker) error {
	return j.append(journalRecord{Op: opStart, Name: name, Marker: &m})
}

// created records that the run's Job, of UID uid, and its Secret were
// created.
func (j *journal) created(name string, uid types.UID) error {
	j.mu.Lock()
	m, ok := j.live[name]
	j.mu.Unlock()
	if !ok || (m.Created && m.UID == uid) {
		return nil
	}
	return j.append(journalRecord{Op: opCreated, Name: name, UID: uid})
}

// end drops the run's marker (a run without one needs no record).
func (j *journal) end(name string) error {
	j.mu.Lock()
	_, ok := j.live[name]
	j.mu.Unlock()
	if !ok {
		return nil
	}
	return j.append(journalRecord{Op: opEnd, Name: name})
}

// drop forgets the run's marker without a record: its start record was
// never written.
func (j *journal) drop(name string) {
	j.mu.Lock()
	delete(j.live, name)
	j.mu.Unlock()
}

// append queues rec, and writes the queue unless another caller is
// writing; it returns once rec is on disk.
func (j *journal) append(rec journalRecord) error {
	line, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("run journal: %w", err)
	}
	j.mu.Lock()
	if j.queued == nil {
		j.queued = &journalBatch{done: make(chan struct{})}
	}
	b := j.queued
	b.data = append(append(b.data, line...), '\n')
	j.applyLocked(rec)
	if j.flushing {
		j.mu.Unlock()
		<-b.done
		return b.err
	}
	j.flushing = true
	for j.queued != nil {
		next := j.queued
		j.queued = nil
		f := j.f
		j.mu.Unlock()
		next.err = j.write(f, next.data)
		j.mu.Lock()
		if next.err == nil {
			j.size += int64(len(next.data))
		}
		close(next.done)
	}
	if j.dead > j.compactAfter && j.dead > len(j.live) {
		if err := j.compactLocked(); err != nil {
			j.log.Warn("cannot compact the run journal; appending to it as it is", slog.Any("error", err))
		}
	}
	j.flushing = false
	j.mu.Unlock()
	return b.err
}

// write appends data to the journal file and makes it durable; a failed
// write is cut back so that the next one starts on a line of its own.
func (j *journal) write(f *os.File, data []byte) error {
	_, err := f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		j.mu.Lock()
		size := j.size
		j.mu.Unlock()
		if terr := f.Truncate(size); terr != nil {
			return fmt.Errorf("run journal %s: %w (and cannot cut it back: %w)", j.path, err, terr)
		}
		return fmt.Errorf("run journal %s: %w", j.path, err)
	}
	return nil
}

// compactLocked rewrites the journal with only the live markers (a new
// file, fsync'd, renamed over the old one) and opens it for appending.
// The caller holds j.mu and no write is in progress.
func (j *journal) compactLocked() error {
	var buf bytes.Buffer
	for name, m := range j.live {
		line, err := json.Marshal(journalRecord{Op: opStart, Name: name, Marker: &m})
		if err != nil {
			return fmt.Errorf("run journal: %w", err)
		}
		buf.Write(line)
		buf.WriteByte('\n')
	}
	if err := safefile.WriteAtomic(j.path, buf.Bytes(), 0o600, true); err != nil {
		return fmt.Errorf("run journal: %w", err)
	}
	f, err := safefile.OpenWrite(j.path, safefile.Append, 0o600)
	if err != nil {
		return fmt.Errorf("run journal: %w", err)
	}
	if j.f != nil {
		j.f.Close()
	}
	j.f, j.size, j.dead = f, int64(buf.Len()), 0
	return nil
}

// close closes the journal file and gives up its lock.
func (j *journal) close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	var err error
	if j.f != nil {
		err = j.f.Close()
		j.f = nil
	}
	if j.lock != nil {
		j.lock.Unlock()
		j.lock = nil
	}
	return err
}
