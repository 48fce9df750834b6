package spool

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/pcsync/pcsync/pkg/result"
	"github.com/pcsync/pcsync/pkg/runs"
)

// entryState is where a request name stands in the daemon loop.
type entryState string

// The states of a request name.
const (
	// statePending: not accepted yet (being read, or waiting for a retry).
	statePending entryState = "pending"
	// stateQueued: accepted, waiting for a slot of its agent.
	stateQueued entryState = "queued"
	// stateStarting: holds a slot; the executor is starting it.
	stateStarting entryState = "starting"
	// stateRunning: started or adopted.
	stateRunning entryState = "running"
	// stateDone: has its result.
	stateDone entryState = "done"
	// stateIgnored: not served (its name is too long, or its result file
	// is not a regular file); warned about once.
	stateIgnored entryState = "ignored"
)

// entry is the loop's record of one request name.
type entry struct {
	name  string
	state entryState
	// admitting is set while a worker reads the request; again asks for
	// another look once it is back.
	admitting, again bool
	retry            *time.Timer
	run              *runs.Run
	handle           runs.Handle
	// runID is the run id the name holds in the index.
	runID string
	// cancelled is set once a cancel was acted on.
	cancelled bool
	// startedAt is when the run started, for the status file.
	startedAt *time.Time
	// ignoredBy is the file that makes an ignored entry ignored; the
	// request is looked at again once it is gone. Empty when the name
	// itself is the problem.
	ignoredBy string
}

// started reports that the executor started (or failed to start) a run.
type started struct {
	name   string
	handle runs.Handle
	err    error
}

// finished reports that a run's result is written.
type finished struct {
	name   string
	status result.Status
	// slot is set when the run held a slot of its agent.
	slot bool
}

// loop is the daemon's single owner of the queue and of every entry. All
// its fields are touched only by the goroutine in run, except the channels.
type loop struct {
	srv     *Server
	entries map[string]*entry
	runIDs  map[string]string // run id → name
	q       *queue

	events    chan spoolEvent
	rescanNow chan struct{}
	retryCh   chan string
	admitCh   chan string
	admitted  chan admission
	startedCh chan started
	finishCh  chan finished

	admitQ []string
	// once is the set of names Once waits for; nil when not in Once mode.
	once map[string]bool
	// inflight counts admissions handed to workers.
	inflight int
	// startedAt is when the loop started, for the status file.
	startedAt time.Time
	// initial holds the names of the first listing not yet read: nothing
	// starts before they all are, so that runs adopted from an earlier
	// daemon count against concurrency first and the first runs start in
	// FIFO order.
	initial map[string]bool
}

// admitAhead is how many request names the loop hands to the admission
// workers ahead of them, and how many of their answers wait for the loop.
// A burst of requests is handed out in one turn of the loop, and its answers
// are taken in a few, instead of a turn of the loop for each name and each
// answer: on a busy machine each turn waits for the loop's goroutine to be
// scheduled again, and a burst of 200 requests waited 120–300 ms (p50) for a
// worker that way.
const admitAhead = 256

// batchMax is how many events or answers one turn of the loop takes at most,
// so that the other channels get their turn.
const batchMax = 256

func newLoop(srv *Server) *loop {
	return &loop{
		srv:       srv,
		startedAt: time.Now().UTC(),
		entries:   map[string]*entry{},
		runIDs:    map[string]string{},
		q:         newQueue(),
		events:    make(chan spoolEvent, 1024),
		rescanNow: make(chan struct{}, 1),
		retryCh:   make(chan string, 64),
		admitCh:   make(chan string, admitAhead),
		admitted:  make(chan admission, admitAhead),
		startedCh: make(chan started, 64),
		finishCh:  make(chan finished, 64),
	}
}

func (l *loop) observe(e *entry, kind EventKind, status result.Status) {
	if l.srv.opts.Observe == nil {
		return
	}
	ev := Event{Kind: kind, Name: e.name, RunID: e.runID, Status: status}
	if e.run != nil {
		ev.Agent = e.run.AgentKey()
		ev.RunID = e.run.RunID
	}
	l.srv.opts.Observe(ev)
}

// run is the loop. wg tracks the goroutines it starts.
func (l *loop) run(ctx context.Context, wg *sync.WaitGroup) error {
	snap, err := scanSpool(l.srv.opts.Spool)
	if err != nil {
		return err
	}
	l.takeFirstListing(snap)
	ticker := time.NewTicker(l.srv.opts.RescanInterval)
	defer ticker.Stop()
	status := time.NewTicker(250 * time.Millisecond)
	defer status.Stop()
	defer l.stopTimers()
	defer l.writeStatus(true)
	dirty := true
	var written time.Time
	for {
		if l.once != nil && len(l.once) == 0 && l.inflight == 0 {
			return nil
		}
		l.updateMetrics()
		l.handOut()
		statusTurn := false
		var admitCh chan string
		var next string
		if len(l.admitQ) > 0 {
			admitCh, next = l.admitCh, l.admitQ[0]
		}
		select {
		case <-ctx.Done():
			return nil
		case admitCh <- next:
			l.admitQ = l.admitQ[1:]
			l.inflight++
		case ev := <-l.events:
			l.takeEvents(ev)
		case name := <-l.retryCh:
			if e := l.entries[name]; e != nil {
				e.retry = nil
				l.consider(name)
			}
		case <-ticker.C:
			l.rescan()
		case <-status.C:
			// Rewritten when anything happened since the last write.
			// and at least every heartbeat interval.
			statusTurn = true
			if dirty || time.Since(written) >= l.srv.opts.HeartbeatInterval {
				l.writeStatus(false)
				dirty, written = false, time.Now()
			}
		case <-l.srv.modelSet:
			// The companies in the status file change.
		case <-l.rescanNow:
			l.rescan()
		case a := <-l.admitted:
			l.takeAdmissions(ctx, wg, a)
		case s := <-l.startedCh:
			l.onStarted(ctx, wg, s)
		case f := <-l.finishCh:
			l.onFinished(ctx, wg, f)
		}
		dirty = dirty || !statusTurn
	}
}

// takeFirstListing takes in the first listing: names with results are done (their
// run ids are remembered), the others are looked at.
func (l *loop) takeFirstListing(snap spoolSnapshot) {
	if l.srv.opts.Once {
		l.once = map[string]bool{}
	}
	for name := range snap.requests {
		if p := nameProblem(name); p != "" {
			e := &entry{name: name}
			l.entries[name] = e
			l.ignore(e, "", p)
			continue
		}
		if snap.results[name] {
			e := &entry{name: name, state: stateDone}
			l.entries[name] = e
			paths := l.srv.paths(name)
			r, err := result.Read(paths.Result())
			if p := resultProblem(paths, err); p != "" {
				l.ignore(e, paths.Result(), p)
			} else if err == nil && r.Status != result.StatusRejected && r.RunID != "" {
				l.claimRunID(e, r.RunID)
			}
			continue
		}
		if l.once != nil {
			l.once[name] = true
		}
	}
	l.initial = map[string]bool{}
	for name := range snap.requests {
		if l.entries[name] == nil {
			l.initial[name] = true
			l.consider(name)
		}
	}
}

func (s *Server) paths(name string) runs.Paths { return runs.Paths{Spool: s.opts.Spool, Name: name} }

func (l *loop) stopTimers() {
	for _, e := range l.entries {
		if e.retry != nil {
			e.retry.Stop()
		}
	}
}

// handOut hands the waiting request names to the admission workers, as many
// as admitCh takes without blocking.
func (l *loop) handOut() {
	for len(l.admitQ) > 0 {
		select {
		case l.admitCh <- l.admitQ[0]:
			l.admitQ = l.admitQ[1:]
			l.inflight++
		default:
			return
		}
	}
}

// takeEvents takes ev and the events already waiting behind it (at most
// batchMax in all).
func (l *loop) takeEvents(ev spoolEvent) {
	l.onEvent(ev)
	for range batchMax - 1 {
		select {
		case ev := <-l.events:
			l.onEvent(ev)
		default:
			return
		}
	}
}

func (l *loop) onEvent(ev spoolEvent) {
	switch ev.kind {
	case runs.KindRequest:
		l.consider(ev.name)
	case runs.KindCancel:
		if e := l.entries[ev.name]; e != nil {
			l.checkCancel(e)
		}
	case runs.KindResult:
		// Our own writes, or someone else's; a result that disappears is
		// noticed by the rescan.
	}
}

// consider looks at a request name: a new or pending one is read (again).
func (l *loop) consider(name string) {
	e := l.entries[name]
	if e == nil {
		if l.once != nil && !l.once[name] {
			return
		}
		e = &entry{name: name, state: statePending}
		l.entries[name] = e
		if p := nameProblem(name); p != "" {
			l.ignore(e, "", p)
			return
		}
	}
	switch e.state {
	case statePending:
		if e.admitting {
			e.again = true
			return
		}
		if e.retry != nil {
			e.retry.Stop()
			e.retry = nil
		}
		e.admitting = true
		l.admitQ = append(l.admitQ, name)
	case stateQueued, stateStarting, stateRunning:
		l.checkCancel(e)
	}
}

// rescan lists the spool directory and catches up with what events missed.
func (l *loop) rescan() {
	snap, err := scanSpool(l.srv.opts.Spool)
	if err != nil {
		l.srv.log.Error("spool rescan failed", slog.Any("error", err))
		return
	}
	for name := range snap.requests {
		e := l.entries[name]
		switch {
		case e == nil:
			l.consider(name)
		case e.state == stateDone && !snap.results[name] && l.once == nil:
			// The result was removed: the request is pending again.
			l.srv.log.Info("result file removed; request is pending again", slog.String("name", name))
			l.releaseRunID(e)
			delete(l.entries, name)
			l.consider(name)
		case e.state == statePending && !e.admitting && e.retry == nil:
			l.consider(name)
		case e.state == stateIgnored && e.ignoredBy != "":
			if _, err := os.Lstat(e.ignoredBy); errors.Is(err, fs.ErrNotExist) {
				l.srv.log.Info("the file that kept the request from running is gone; reading it again",
					slog.String("name", name), slog.String("file", filepath.Base(e.ignoredBy)))
				delete(l.entries, name)
				l.consider(name)
			}
		case snap.cancels[name]:
			l.checkCancel(e)
		}
	}
	for name, e := range l.entries {
		if _, ok := snap.requests[name]; ok || e.admitting {
			continue
		}
		l.vanished(e)
	}
}

// vanished handles a request file that is gone.
func (l *loop) vanished(e *entry) {
	switch e.state {
	case stateQueued:
		l.q.remove(e.run)
	case stateStarting, stateRunning:
		return // the result is written when it ends
	}
	if e.retry != nil {
		e.retry.Stop()
	}
	if e.state != stateDone {
		l.srv.log.Info("request file removed before it ran", slog.String("name", e.name))
	}
	l.releaseRunID(e)
	delete(l.entries, e.name)
	delete(l.once, e.name)
}

func (l *loop) claimRunID(e *entry, id string) {
	e.runID = id
	l.runIDs[id] = e.name
}

func (l *loop) releaseRunID(e *entry) {
	if e.runID != "" && l.runIDs[e.runID] == e.name {
		delete(l.runIDs, e.runID)
	}
}

// ignore marks an entry as not served, with one warning that says why.
// file is the file that causes it ("" when the name itself does).
func (l *loop) ignore(e *entry, file, why string) {
	e.state, e.ignoredBy = stateIgnored, file
	delete(l.once, e.name)
	l.srv.log.Warn("request skipped: "+why, slog.String("name", e.name))
}

// done marks an entry finished.
func (l *loop) done(e *entry, status result.Status) {
	e.state = stateDone
	e.handle = nil
	delete(l.once, e.name)
	l.observe(e, EventFinished, status)
}

func (l *loop) updateMetrics() {
	if m := l.srv.opts.Metrics; m != nil {
		queued, running := l.q.counts()
		m.RunsQueued.Set(float64(queued))
		m.RunsInFlight.Set(float64(running))
	}
}

// cancelRequested reports whether <name>.cancel exists.
func (l *loop) cancelRequested(name string) bool {
	_, err := os.Stat(l.srv.paths(name).Cancel())
	return err == nil
}
