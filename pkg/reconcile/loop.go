package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/pcsync/pcsync/pkg/apply"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/paperclip"
	"github.com/pcsync/pcsync/pkg/render"
)

// Trigger says why a reconcile ran.
type Trigger string

// The triggers of a reconcile.
const (
	// TriggerStart: the first reconcile, when the loop starts.
	TriggerStart Trigger = "start"
	// TriggerChange: files of the config directory changed (or Loop.Trigger
	// was called).
	TriggerChange Trigger = "change"
	// TriggerInterval: the periodic reconcile that corrects drift.
	TriggerInterval Trigger = "interval"
	// TriggerRetry: a retry after a failed apply.
	TriggerRetry Trigger = "retry"
	// TriggerPruneHeld: a prune is held by the prune guard; the reconcile
	// runs again after ApprovalPoll to notice its approval.
	TriggerPruneHeld Trigger = "prune-held"
)

// Stage is the step of a reconcile that failed. The values are the
// "stage" label of pcsync_reconcile_errors_total.
type Stage string

// The stages of a reconcile.
const (
	// StageLoad: reading and validating the config directory.
	StageLoad Stage = "load"
	// StageRender: rendering the tenant manifests (e.g. a patch kustomize
	// cannot apply).
	StageRender Stage = "render"
	// StageApply: applying; the call failed or objects failed.
	StageApply Stage = "apply"
	// StagePrune: pruning was refused (an empty render, more than the prune
	// limit) or pruned objects failed.
	StagePrune Stage = "prune"
	// StagePaperclip: the Paperclip side failed (Paperclip unreachable or
	// refusing, an agent not written, pauses refused by the guard) while the
	// Kubernetes side succeeded.
	StagePaperclip Stage = "paperclip"
)

// Outcome is what one reconcile did.
type Outcome struct {
	// Trigger is why it ran.
	Trigger Trigger
	// Started is when it started; Duration how long it took.
	Started  time.Time
	Duration time.Duration
	// FailedStage is empty on success.
	FailedStage Stage
	// Err is the failure, nil on success. For an invalid config it is the
	// *config.Errors (or the render error) and ConfigErrors has its lines.
	Err error
	// ConfigErrors are the positioned lines of an invalid config.
	ConfigErrors []string
	// Model is the config loaded, nil when it was invalid.
	Model *config.Model
	// Revision names the config loaded (or, invalid, the one tried): the
	// Git commit of a git-sync checkout, else DigestPrefix and a digest of
	// the render ("" for an invalid config then).
	Revision string
	// ConfigChanged says the rendered objects differ from those of the last
	// successful apply (always true for the first one).
	ConfigChanged bool
	// Partial says only the objects that changed since the last successful
	// apply were applied, and nothing pruned: a change of the config
	// directory that removed no object, after an apply that succeeded and
	// left no prune held. Every other reconcile applies every object.
	Partial bool
	// Report is the apply's change set; nil when nothing was applied.
	Report *apply.ChangeSet
	// Drift is the number of objects a reconcile created, changed or
	// recreated although the config had not changed since the last
	// successful apply: drift made in the cluster, now corrected.
	Drift int
	// Paperclip is the Paperclip side's report; nil when no company opts
	// in or the loop has no PaperclipReconciler.
	Paperclip *paperclip.Report
	// PaperclipErr is the Paperclip side's failure, also in Err.
	PaperclipErr error
	// Stages are the wall times of its stages (Report.Stages splits Apply).
	Stages Stages
}

// Stages are the wall times of a reconcile's stages.
type Stages struct {
	Load, Render, Digest, Apply, Paperclip time.Duration
}

// Loop keeps the cluster in the shape of the config directory: it loads,
// validates, renders and applies at start, on every change of the directory
// and every Interval. An invalid config changes nothing: no apply, no prune,
// the last good config stays in force (for the runs loop too) and the
// failure is reported in the log, the metrics and the health conditions.
//
// Without an Applier the loop only loads and validates: it hands every valid
// config to Options.OnModel and applies nothing (pcsync daemon
// --no-reconcile, or the local executor).
type Loop struct {
	opts    Options
	applier Applier
	log     *slog.Logger
	trigger chan struct{}

	model     atomic.Pointer[config.Model]
	ready     chan struct{}
	readyOnce sync.Once

	// full asks that the next reconcile apply every object (Trigger).
	full atomic.Bool

	// Only the Run goroutine touches these.
	appliedHash string // digest of the objects of the last successful apply
	// applied are the digests of the objects of the last successful
	// apply that left nothing pending; nil when a change must apply in full.
	applied digests
	// digested are the last render's digests by object (digestRender).
	digested   objectDigests
	warnedHash string // digest of the render whose warnings were logged
	lastErr    string // the last failure logged, to log a repeat at debug
	lastHold   string // the token of the held prune logged at ERROR
	// shards are the shards the configs loaded named, for the handover.
	shards map[config.Shard]bool
}

// New returns a loop; applier may be nil (validate only).
func New(applier Applier, opts Options) (*Loop, error) {
	if err := opts.complete(); err != nil {
		return nil, err
	}
	l := &Loop{
		opts:    opts,
		applier: applier,
		log:     opts.Logger.With(slog.String("loop", "reconcile")),
		trigger: make(chan struct{}, 1),
		ready:   make(chan struct{}),
		shards:  map[config.Shard]bool{"": true},
	}
	if h := opts.Health; h != nil {
		h.Set(CondConfigLoaded, false, true, "NotLoaded", "no valid config has been loaded from "+opts.Dir+" yet")
	}
	return l, nil
}

// Health condition types the loop maintains.
const (
	// CondConfigLoaded (gating) is false until a valid config was loaded.
	CondConfigLoaded = "ConfigLoaded"
	// CondConfigValid (not gating) is false while the config directory is
	// invalid: the daemon is degraded and keeps the last good state.
	CondConfigValid = "ConfigValid"
	// CondReconciled (not gating) is false while the last apply failed.
	CondReconciled = "Reconciled"
	// CondPruneAllowed (not gating, set only with Prune) is false while the
	// prune guard holds a prune: its message says what would be deleted and
	// how to approve it.
	CondPruneAllowed = "PruneAllowed"
	// CondPaperclipReconciled (not gating) is false while the last
	// Paperclip reconcile failed; set only when a company opts in.
	CondPaperclipReconciled = "PaperclipReconciled"
)

// Model returns the last valid config, nil before the first.
func (l *Loop) Model() *config.Model { return l.model.Load() }

// Ready is closed once a valid config was loaded (Model is not nil).
func (l *Loop) Ready() <-chan struct{} { return l.ready }

// Trigger asks for a reconcile of every object as soon as the current one
// (if any) ends.
func (l *Loop) Trigger() {
	l.full.Store(true)
	select {
	case l.trigger <- struct{}{}:
	default:
	}
}

// Run reconciles until ctx ends; it returns nil then. Failures are
// reported and retried, never returned.
func (l *Loop) Run(ctx context.Context) error {
	if l.opts.Watch {
		w, err := NewWatcher(l.opts.Dir, WatchOptions{Debounce: l.opts.Debounce, MaxDelay: l.opts.MaxDelay, Logger: l.log})
		if err != nil {
			l.log.Warn("cannot watch the config directory; relying on the periodic reconcile",
				slog.Any("error", err), slog.Duration("interval", l.opts.Interval))
		} else {
			var wg sync.WaitGroup
			defer wg.Wait()
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			wg.Add(1)
			go func() { defer wg.Done(); w.Run(wctx, l.trigger) }()
		}
	}
	l.log.Info("reconcile loop started", slog.String("config", l.opts.Dir), slog.Duration("interval", l.opts.Interval),
		slog.Bool("apply", l.applier != nil), slog.Bool("prune", l.opts.Apply.Prune))
	defer l.log.Info("reconcile loop stopped")
	trigger := TriggerStart
	failures := 0
	for {
		out := l.reconcile(ctx, trigger)
		if ctx.Err() != nil {
			return nil
		}
		wait, next := l.nextInterval(), TriggerInterval
		if retryable(out) {
			failures++
			backoff := l.opts.RetryMin << min(failures-1, 20)
			if backoff <= 0 || backoff > l.opts.RetryMax {
				backoff = l.opts.RetryMax
			}
			if backoff < wait {
				wait, next = backoff, TriggerRetry
			}
		} else {
			failures = 0
		}
		if out.Report != nil && out.Report.PruneHeld != nil && l.opts.ApprovalPoll < wait {
			wait, next = l.opts.ApprovalPoll, TriggerPruneHeld
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-l.trigger:
			timer.Stop()
			trigger = TriggerChange
		case <-timer.C:
			trigger = next
		}
	}
}

// ReconcileOnce runs one reconcile now, outside Run (pcsync daemon --once);
// it must not be called while Run runs.
func (l *Loop) ReconcileOnce(ctx context.Context) Outcome {
	return l.reconcile(ctx, TriggerStart)
}

// Retried says the reconcile failed and is retried (with backoff) without
// a config change: an apply, a prune or the Paperclip side that may pass.
func (o Outcome) Retried() bool { return o.Err != nil && retryable(o) }

// retryable says whether a failure may pass without a config change.
func retryable(out Outcome) bool {
	switch out.FailedStage {
	case StageApply:
		return true
	case StagePrune:
		return !errors.Is(out.Err, apply.ErrEmptyRender) && !errors.Is(out.Err, apply.ErrMassPrune)
	case StagePaperclip:
		return !errors.Is(out.Err, paperclip.ErrMassPause)
	}
	return false
}

// nextInterval is Interval plus jitter.
func (l *Loop) nextInterval() time.Duration {
	d := l.opts.Interval
	if l.opts.Jitter > 0 {
		d += time.Duration(rand.Float64() * l.opts.Jitter * float64(d))
	}
	return d
}

// reconcile runs one load → validate → render → apply (→ prune).
func (l *Loop) reconcile(ctx context.Context, trigger Trigger) (out Outcome) {
	out = Outcome{Trigger: trigger, Started: time.Now()}
	log := l.log.With(slog.String("trigger", string(trigger)))
	defer func() { l.observe(ctx, &out) }()
	full := l.full.Swap(false) || trigger != TriggerChange

	m, rendered, dir, ok := l.loadAndRender(ctx, log, &out)
	if !ok {
		out.Revision = revision(dir, "")
		return out
	}
	out.Model = m
	t := time.Now()
	now, hash, dup, digested := digestRender(rendered.Objects, l.digested)
	l.digested = digested
	if l.opts.Render.Cache == nil {
		// Kept past this reconcile only with a render cache, which hands
		// the same objects back: else they would keep the render alive.
		defer func() { l.digested = nil }()
	}
	out.Stages.Digest = time.Since(t)
	out.Revision = revision(dir, hash)
	out.ConfigChanged = hash != l.appliedHash
	l.valid(log, m, rendered, hash)

	if l.applier == nil {
		l.publish(m)
		if l.reconcilePaperclip(ctx, log, l.served(m), &out) {
			l.failed(ctx, log, &out)
		}
		return out
	}
	report, err := l.apply(ctx, log, &out, rendered.Objects, l.applyOptions(m), full || dup, now)
	// A failed apply still publishes: the config is valid, and the runs
	// loop must not stay on an older one (a run of a company whose tenant
	// could not be applied fails with the cluster's reason).
	l.publish(m)
	if ctx.Err() != nil {
		return out
	}
	l.record(log, &out, len(rendered.Objects))
	if !out.Partial {
		l.pruneHeld(ctx, log, trigger, report)
	}
	out.FailedStage, out.Err = applyFailure(err, report)
	kubeOK := out.Err == nil
	l.applied = nil
	if kubeOK {
		l.appliedHash = hash
		if settled(report) && !dup {
			l.applied = now
		}
	}
	if l.reconcilePaperclip(ctx, log, l.served(m), &out) || !kubeOK {
		l.failed(ctx, log, &out)
		return out
	}
	l.lastErr = ""
	if h := l.opts.Health; h != nil {
		h.Set(CondReconciled, true, false, "Applied", fmt.Sprintf("%d objects in the cluster as the config says", len(rendered.Objects)))
	}
	return out
}

// apply applies objs: only those that changed since the last successful
// apply (Partial, no prune) when full is false, the last apply left
// nothing pending and none was removed; else all of them, as opts say.
func (l *Loop) apply(ctx context.Context, log *slog.Logger, out *Outcome, objs []*unstructured.Unstructured,
	opts apply.ApplyOptions, full bool, now digests) (*apply.ChangeSet, error) {
	t := time.Now()
	defer func() { out.Stages.Apply = time.Since(t) }()
	if !full && l.applied != nil {
		changed, removed := changes(l.applied, now, l.digested, objs)
		if !removed {
			po := opts
			po.Partial, po.Prune = true, false
			report, err := l.applier.Apply(ctx, changed, po)
			if !errors.Is(err, apply.ErrPartialNoParent) {
				out.Report, out.Partial = report, true
				return report, err
			}
			log.Info("applying in full", slog.Any("reason", err))
		}
	}
	report, err := l.applier.Apply(ctx, objs, opts)
	out.Report = report
	return report, err
}

// settled says an apply left nothing for a later one: no prune held and
// no Namespace retained (their prune is tried again in full).
func settled(r *apply.ChangeSet) bool {
	return r != nil && r.PruneHeld == nil && r.Count(apply.ActionRetained) == 0
}

// observe records the end of a reconcile: its duration, metric and Observe.
func (l *Loop) observe(ctx context.Context, out *Outcome) {
	out.Duration = time.Since(out.Started)
	if ctx.Err() != nil {
		return // stopping: not a failure worth reporting
	}
	if (l.applier != nil || out.Paperclip != nil) && l.opts.Metrics != nil {
		l.opts.Metrics.ObserveReconcile(out.Duration, string(out.FailedStage), time.Now())
	}
	if l.opts.Observe != nil {
		l.opts.Observe(*out)
	}
}

// served is the part of m the loop renders, applies and keeps in
// Paperclip: the shard's companies that are not suspended.
func (l *Loop) served(m *config.Model) *config.Model {
	return config.Unsuspended(l.opts.Shard.Model(m))
}

// applyOptions are the options of the apply of m: Options.Apply with the
// handover of the companies other shards serve and of the shard's
// suspended ones (their tenants are never pruned), and of those moved
// into this shard (taken from the others' sets).
func (l *Loop) applyOptions(m *config.Model) apply.ApplyOptions {
	o := l.opts.Apply
	o.Handover.Keep = append(l.opts.Shard.Elsewhere(m), config.SuspendedNamespaces(l.opts.Shard.Model(m))...)
	slices.Sort(o.Handover.Keep)
	for _, s := range l.opts.Shard.Others(m) {
		l.shards[s] = true
	}
	if l.opts.ShardSet == nil {
		return o
	}
	o.Handover.From = nil
	for s := range l.shards {
		if s != l.opts.Shard {
			o.Handover.From = append(o.Handover.From, l.opts.ShardSet(s))
		}
	}
	slices.Sort(o.Handover.From)
	return o
}

// loadAndRender loads the config from the directory it resolves to (dir)
// and renders the served companies; a failure is recorded in out and ok
// is false.
func (l *Loop) loadAndRender(ctx context.Context, log *slog.Logger, out *Outcome) (_ *config.Model, _ *render.Output, dir string, ok bool) {
	// Load from the directory the path resolves to now: one consistent
	// checkout even if git-sync swaps its link meanwhile (and the loader
	// does not descend into a root that is a link).
	dir, err := filepath.EvalSymlinks(l.opts.Dir)
	if err != nil {
		l.invalid(log, out, StageLoad, fmt.Errorf("config directory: %w", err))
		return nil, nil, "", false
	}
	t := time.Now()
	m, err := config.Load(ctx, dir, l.opts.Load)
	out.Stages.Load = time.Since(t)
	if err != nil {
		if ctx.Err() == nil {
			l.invalid(log, out, StageLoad, err)
		}
		return nil, nil, dir, false
	}
	t = time.Now()
	rendered, err := render.Render(l.served(m), l.opts.Render)
	out.Stages.Render = time.Since(t)
	if err != nil {
		l.invalid(log, out, StageRender, err)
		return nil, nil, dir, false
	}
	return m, rendered, dir, true
}

// applyFailure returns the stage that failed and why, from apply's error and
// report: the prune when only the prune failed (or its guard held it),
// else the apply; none when nothing failed.
func applyFailure(err error, report *apply.ChangeSet) (Stage, error) {
	switch {
	case err != nil:
		if errors.Is(err, apply.ErrEmptyRender) || errors.Is(err, apply.ErrMassPrune) {
			return StagePrune, err
		}
		return StageApply, err
	case report != nil && report.Err() != nil:
		if report.OnlyPrunesFailed() {
			return StagePrune, report.Err()
		}
		return StageApply, report.Err()
	}
	return "", nil
}

// failed logs a failed reconcile (a repeat of the same failure at debug)
// and marks the Reconciled condition false.
func (l *Loop) failed(ctx context.Context, log *slog.Logger, out *Outcome) {
	msg := out.Err.Error()
	lvl := slog.LevelError
	if msg == l.lastErr {
		lvl = slog.LevelDebug
	}
	l.lastErr = msg
	log.Log(ctx, lvl, "reconcile failed", slog.String("stage", string(out.FailedStage)), slog.Any("error", out.Err))
	if h := l.opts.Health; h != nil {
		h.Set(CondReconciled, false, false, reasonFor(*out), firstLines(msg, 3))
	}
}

// reconcilePaperclip runs the Paperclip side, records it in out, the log
// and the metrics, and says whether it failed.
func (l *Loop) reconcilePaperclip(ctx context.Context, log *slog.Logger, m *config.Model, out *Outcome) bool {
	if l.opts.Paperclip == nil || !paperclip.Wants(m) {
		return false
	}
	ro := l.opts.PaperclipOptions
	ro.PauseMax = l.opts.Apply.PruneMax
	if ro.PauseFloor <= 0 {
		ro.PauseFloor = paperclip.DefaultReconcileOptions().PauseFloor
	}
	ro.AllowMassPause = ro.AllowMassPause || l.opts.Apply.AllowMassPrune
	t := time.Now()
	rep, err := l.opts.Paperclip.Reconcile(ctx, m, ro)
	out.Stages.Paperclip = time.Since(t)
	if ctx.Err() != nil {
		return false
	}
	out.Paperclip = rep
	err = errors.Join(err, rep.Err())
	if mt := l.opts.Metrics; mt != nil && rep != nil {
		for _, c := range rep.Companies {
			for _, a := range c.Agents {
				mt.PaperclipAgents.WithLabelValues(a.Action()).Inc()
			}
		}
		mt.PaperclipDrift.Add(float64(rep.Drift()))
		mt.PaperclipRequests.WithLabelValues("read").Add(float64(rep.Reads))
		mt.PaperclipRequests.WithLabelValues("write").Add(float64(rep.Writes))
	}
	if mt := l.opts.Metrics; mt != nil && errors.Is(err, paperclip.ErrUnreachable) {
		mt.PaperclipUnreachable.Inc()
	}
	if rep != nil {
		lvl := slog.LevelInfo
		if rep.Writes == 0 && err == nil {
			lvl = slog.LevelDebug
		}
		log.Log(ctx, lvl, "paperclip reconciled", slog.Int("created", rep.Count("created")),
			slog.Int("configured", rep.Count("configured")), slog.Int("resumed", rep.Count("resumed")),
			slog.Int("paused", rep.Count("paused")), slog.Int("unchanged", rep.Count("unchanged")),
			slog.Int("refused", rep.Count("refused")), slog.Int("failed", rep.Count("failed")),
			slog.Int("drift", rep.Drift()), slog.Int64("readRequests", rep.Reads),
			slog.Int64("writeRequests", rep.Writes), slog.Duration("duration", rep.Duration))
	}
	if err == nil {
		if h := l.opts.Health; h != nil {
			h.Set(CondPaperclipReconciled, true, false, "Reconciled", "Paperclip's agents are as the config declares them")
		}
		return false
	}
	out.PaperclipErr = err
	if out.Err == nil {
		out.FailedStage, out.Err = StagePaperclip, err
	} else {
		out.Err = errors.Join(out.Err, err)
	}
	if h := l.opts.Health; h != nil {
		reason := "PaperclipFailed"
		if errors.Is(err, paperclip.ErrMassPause) {
			reason = "PauseRefused"
		}
		h.Set(CondPaperclipReconciled, false, false, reason, firstLines(err.Error(), 3))
	}
	return true
}

// invalid reports a config that did not load or render: nothing is
// applied or pruned, the last good config stays in force.
func (l *Loop) invalid(log *slog.Logger, out *Outcome, stage Stage, err error) {
	out.FailedStage, out.Err = stage, err
	var ce *config.Errors
	if errors.As(err, &ce) {
		out.ConfigErrors = ce.Lines()
	} else {
		out.ConfigErrors = []string{err.Error()}
	}
	if mt := l.opts.Metrics; mt != nil {
		mt.ConfigValid.Set(0)
	}
	keeping := "no valid config has been loaded yet; nothing is applied"
	if l.Model() != nil {
		keeping = "keeping the last good state; nothing is applied or pruned"
	}
	msg := strings.Join(out.ConfigErrors, "\n")
	lvl := slog.LevelError
	if msg == l.lastErr {
		lvl = slog.LevelDebug // the same errors again, at the next interval
	}
	l.lastErr = msg
	log.Log(context.Background(), lvl, "invalid config; "+keeping, slog.String("stage", string(stage)),
		slog.Int("errors", len(out.ConfigErrors)), slog.Any("lines", capLines(out.ConfigErrors, 50)))
	if h := l.opts.Health; h != nil {
		h.Set(CondConfigValid, false, false, "InvalidConfig",
			fmt.Sprintf("%s; %s", firstLines(msg, 5), keeping))
	}
}

// valid records a config that loaded and rendered.
func (l *Loop) valid(log *slog.Logger, m *config.Model, rendered *render.Output, hash string) {
	if mt := l.opts.Metrics; mt != nil {
		mt.ConfigValid.Set(1)
	}
	if h := l.opts.Health; h != nil {
		h.Set(CondConfigValid, true, false, "Valid", fmt.Sprintf("%d companies", len(m.Companies)))
		h.Set(CondConfigLoaded, true, true, "Loaded", "a valid config is in force")
	}
	if hash != l.warnedHash {
		for _, w := range rendered.Warnings {
			log.Warn("config warning", slog.String("warning", w))
		}
		l.warnedHash = hash
	}
}

// publish makes m the config in force: Model, OnModel (the runs loop) and
// Ready. With an Applier it is called after the apply, so that runs of a
// new company start once its tenant namespace exists.
func (l *Loop) publish(m *config.Model) {
	l.model.Store(m)
	if l.opts.OnModel != nil {
		l.opts.OnModel(m)
	}
	l.readyOnce.Do(func() { close(l.ready) })
}

// record logs and counts what an apply did.
func (l *Loop) record(log *slog.Logger, out *Outcome, rendered int) {
	r := out.Report
	if r == nil {
		return
	}
	mt := l.opts.Metrics
	drifting := !out.ConfigChanged
	for _, o := range r.Objects {
		if mt != nil {
			mt.ObjectsApplied.WithLabelValues(string(o.Action)).Inc()
		}
		attrs := []any{slog.String("object", o.Ref.String()), slog.String("action", string(o.Action))}
		switch o.Action {
		case apply.ActionUnchanged:
			continue
		case apply.ActionFailed:
			log.Error("object failed", append(attrs, slog.Any("error", o.Err))...)
		case apply.ActionPruned:
			if mt != nil {
				mt.Prunes.Inc()
			}
			log.Info("object pruned", attrs...)
		case apply.ActionRetained:
			log.Warn("namespace retained", append(attrs, slog.String("note", o.Note))...)
		case apply.ActionReleased:
			log.Info("adopted object released", attrs...)
		case apply.ActionCreated, apply.ActionConfigured, apply.ActionRecreated:
			if drifting {
				out.Drift++
				log.Warn("drift corrected", attrs...)
			} else {
				log.Info("object applied", attrs...)
			}
		}
	}
	if mt != nil && out.Drift > 0 {
		mt.DriftCorrections.Add(float64(out.Drift))
	}
	lvl := slog.LevelInfo
	if r.MutatingRequests == 0 && r.Count(apply.ActionFailed) == 0 {
		lvl = slog.LevelDebug // nothing to do: the common case every interval
	}
	log.Log(context.Background(), lvl, "reconciled", slog.Bool("partial", out.Partial),
		slog.Int("objects", rendered), slog.Int("created", r.Count(apply.ActionCreated)),
		slog.Int("configured", r.Count(apply.ActionConfigured)), slog.Int("unchanged", r.Count(apply.ActionUnchanged)),
		slog.Int("recreated", r.Count(apply.ActionRecreated)), slog.Int("pruned", r.Count(apply.ActionPruned)),
		slog.Int("retained", r.Count(apply.ActionRetained)), slog.Int("released", r.Count(apply.ActionReleased)),
		slog.Int("failed", r.Count(apply.ActionFailed)),
		slog.Int("drift", out.Drift), slog.Int64("mutatingRequests", r.MutatingRequests),
		slog.Duration("duration", r.Duration), slog.Group("stages",
			slog.Duration("load", out.Stages.Load), slog.Duration("render", out.Stages.Render),
			slog.Duration("digest", out.Stages.Digest),
			slog.Duration("read", r.Stages.Read), slog.Duration("plan", r.Stages.Plan),
			slog.Duration("apply", r.Stages.Apply), slog.Duration("prune", r.Stages.Prune)))
}

// pruneHeld reports the prune the guard holds, or that none is held: the
// metric pcsync_prune_blocked, the condition PruneAllowed and, at ERROR, a
// log record that says what would be deleted and how to approve it (again
// at every reconcile but the approval polls, and whenever the held prune
// changes).
func (l *Loop) pruneHeld(ctx context.Context, log *slog.Logger, trigger Trigger, r *apply.ChangeSet) {
	if !l.opts.Apply.Prune || r == nil {
		return
	}
	h := r.PruneHeld
	mt, hc := l.opts.Metrics, l.opts.Health
	if h == nil {
		if mt != nil {
			mt.PruneBlocked.Set(0)
		}
		if hc != nil {
			hc.Set(CondPruneAllowed, true, false, "NoPruneHeld", "no prune is held by the prune guard")
		}
		if l.lastHold != "" {
			log.Info("the held prune is no longer held (approved, or the config changed)")
		}
		l.lastHold = ""
		return
	}
	approve := h.ApproveCommand(r.Parent)
	msg := "prune held by the prune guard: " + h.Describe() + "; nothing of it is deleted until it is approved: " +
		approve + " (or run pcsync apply --prune --allow-mass-prune)"
	if mt != nil {
		mt.PruneBlocked.Set(float64(len(h.Tenants)))
	}
	if hc != nil {
		hc.Set(CondPruneAllowed, false, false, "PruneHeld", msg)
	}
	lvl := slog.LevelError
	if h.Token == l.lastHold && trigger == TriggerPruneHeld {
		lvl = slog.LevelDebug
	}
	l.lastHold = h.Token
	log.Log(ctx, lvl, msg, slog.String("reason", string(h.Reason)), slog.Any("tenants", capLines(h.Tenants, 50)),
		slog.Int("fleet", h.Fleet), slog.Int("limit", h.Limit), slog.Int("objects", h.Objects),
		slog.String("token", h.Token), slog.String("approve", approve))
}

func reasonFor(out Outcome) string {
	switch {
	case errors.Is(out.Err, apply.ErrEmptyRender), errors.Is(out.Err, apply.ErrMassPrune):
		return "PruneRefused"
	case out.FailedStage == StagePrune:
		return "PruneFailed"
	case errors.Is(out.Err, paperclip.ErrMassPause):
		return "PauseRefused"
	case out.FailedStage == StagePaperclip:
		return "PaperclipFailed"
	}
	return "ApplyFailed"
}

func firstLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) <= n {
		return strings.Join(lines, "; ")
	}
	return strings.Join(lines[:n], "; ") + fmt.Sprintf("; and %d more", len(lines)-n)
}

func capLines(lines []string, n int) []string {
	if len(lines) <= n {
		return lines
	}
	return append(append([]string(nil), lines[:n]...), fmt.Sprintf("… and %d more", len(lines)-n))
}
