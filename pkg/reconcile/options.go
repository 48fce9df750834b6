package reconcile

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/pcsync/pcsync/pkg/apply"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/health"
	"github.com/pcsync/pcsync/pkg/metrics"
	"github.com/pcsync/pcsync/pkg/paperclip"
	"github.com/pcsync/pcsync/pkg/render"
)

// Applier puts rendered objects into the cluster; *apply.Manager is one.
type Applier interface {
	Apply(ctx context.Context, objs []*unstructured.Unstructured, opts apply.ApplyOptions) (*apply.ChangeSet, error)
}

// PaperclipReconciler keeps the Paperclip side of opted-in companies;
// *paperclip.Reconciler is one.
type PaperclipReconciler interface {
	Reconcile(ctx context.Context, m *config.Model, opts paperclip.ReconcileOptions) (*paperclip.Report, error)
}

// Options configure a Loop. Start from DefaultOptions.
type Options struct {
	// Dir is the config directory. It may be, or lie under, a symbolic link
	// that is swapped atomically (git-sync): the link's parent directory is
	// watched and the link re-resolved on every change. Required.
	Dir string
	// Interval is the time between periodic reconciles, which correct drift
	// made in the cluster and catch changes the watch missed. Default 5m.
	Interval time.Duration
	// Jitter spreads periodic reconciles, so that replicas and restarts do
	// not fall into step: each wait is Interval plus a random share of up to
	// Jitter×Interval. Default 0.1; zero means exactly Interval.
	Jitter float64
	// Watch enables reconciling on changes in Dir (fsnotify). Default true.
	Watch bool
	// Debounce is the quiet time after the last file event before a change
	// is reconciled, so that a checkout of many files gives one reconcile.
	// Default 1s.
	Debounce time.Duration
	// MaxDelay bounds how long a stream of events may postpone a change's
	// reconcile. Default 10s.
	MaxDelay time.Duration
	// RetryMin and RetryMax bound the exponential backoff after a failed
	// apply (the cluster unreachable, an object refused). An invalid config
	// is not retried: it waits for the next change or interval. Defaults 5s
	// and 5m (never more than Interval).
	RetryMin, RetryMax time.Duration
	// Apply are the options of every apply. Prune in it deletes members of
	// the ApplySet that are no longer rendered; an invalid config never gets
	// that far, and pkg/apply's prune guard holds an empty render, the whole
	// fleet or more tenants than PruneMax (at least PruneFloor) until the
	// prune is approved. Default: apply.DefaultApplyOptions() (ForceConflicts:
	// fields someone took over with kubectl edit are taken back, the config
	// repository is the source of truth) with HoldPrune, so that a held prune
	// stops only the deletions, not the rest of the apply.
	Apply apply.ApplyOptions
	// ApprovalPoll is how soon a reconcile runs again while a prune is held,
	// to notice its approval (the parent's annotation). Default 30s (never
	// more than Interval).
	ApprovalPoll time.Duration
	// Paperclip, when set, reconciles the Paperclip side of the companies
	// that opt in (Company spec.paperclip.manage) after the Kubernetes side,
	// at every reconcile, whether or not the Kubernetes apply succeeded (and
	// without an Applier too). Its failure is stage "paperclip"; it never
	// stops the Kubernetes side.
	Paperclip PaperclipReconciler
	// PaperclipOptions are the options of every Paperclip reconcile. Its
	// pause guard follows Apply's prune guard: PauseMax is always
	// Apply.PruneMax, AllowMassPause is also set by Apply.AllowMassPrune,
	// and a PauseFloor of 0 means the default (3).
	PaperclipOptions paperclip.ReconcileOptions
	// Shard is the shard the loop serves (config.LabelShard): it renders,
	// applies and keeps in Paperclip only that shard's companies ("": those
	// that name none). The tenants of the others' companies are handed
	// over, never pruned (apply.Handover.Keep).
	Shard config.Shard
	// ShardSet returns the ApplySet ID of shard s's daemon: Apply takes
	// over the members of the other shards' sets when a company moves into
	// this one (apply.Handover.From), for every shard the configs loaded
	// since the start named, and "". Nil takes nothing over: a company
	// moved in then fails as not owned.
	ShardSet func(s config.Shard) string
	// Load and Render configure the config loader and the renderer. The
	// loop gives Load a cache of its own when it has none, so that a
	// change parses and validates again only the files that changed. With
	// Render.Cache (none by default: it holds every company's objects,
	// about 50 KiB a company in egress mode proxy), a change renders and
	// digests only the companies whose inputs changed.
	Load   config.LoadOptions
	Render render.Options
	// Logger receives the loop's logs. Default slog.Default().
	Logger *slog.Logger
	// Metrics, when set, records every reconcile (pcsync_reconcile_*,
	// pcsync_config_valid, pcsync_objects_applied_total,
	// pcsync_drift_corrections_total, pcsync_pruned_objects_total).
	Metrics *metrics.Metrics
	// Health, when set, gets the conditions ConfigLoaded (gating: no valid
	// config has been loaded yet), ConfigValid (the last load was valid; if
	// not, the daemon is degraded and keeps the last good state) and, with an
	// Applier, Reconciled (the last apply succeeded).
	Health *health.Checker
	// OnModel, when set, is called with every valid config loaded (every
	// shard's companies: Shard.Model gives this loop's part), after
	// it was applied (with an Applier, whether or not the apply succeeded);
	// the runs loop uses it to accept new companies and agents. It must not
	// block for long.
	OnModel func(*config.Model)
	// Observe, when set, is called after every reconcile with its outcome.
	// It must not block for long. Tests and tools use it.
	Observe func(Outcome)
}

// DefaultOptions returns the defaults described on Options for dir.
func DefaultOptions(dir string) Options {
	ao := apply.DefaultApplyOptions()
	ao.HoldPrune = true
	return Options{
		Dir:              dir,
		Interval:         5 * time.Minute,
		Jitter:           0.1,
		Watch:            true,
		Debounce:         time.Second,
		MaxDelay:         10 * time.Second,
		RetryMin:         5 * time.Second,
		RetryMax:         5 * time.Minute,
		Apply:            ao,
		PaperclipOptions: paperclip.DefaultReconcileOptions(),
		Load:             config.DefaultLoadOptions(),
		Render:           render.DefaultOptions(),
		Logger:           slog.Default(),

		ApprovalPoll: 30 * time.Second,
	}
}

// complete fills zero fields with their defaults and checks the rest.
func (o *Options) complete() error {
	if o.Dir == "" {
		return errors.New("reconcile: no config directory")
	}
	abs, err := filepath.Abs(o.Dir)
	if err != nil {
		return fmt.Errorf("reconcile: config directory: %w", err)
	}
	o.Dir = abs
	d := DefaultOptions(o.Dir)
	o.Interval = cmp.Or(max(o.Interval, 0), d.Interval)
	o.Jitter = min(max(o.Jitter, 0), 1)
	o.Debounce = cmp.Or(max(o.Debounce, 0), d.Debounce)
	if o.MaxDelay < o.Debounce {
		o.MaxDelay = max(d.MaxDelay, o.Debounce)
	}
	o.RetryMin = cmp.Or(max(o.RetryMin, 0), d.RetryMin)
	o.RetryMax = cmp.Or(max(o.RetryMax, 0), d.RetryMax)
	o.RetryMax = min(o.RetryMax, o.Interval)
	o.RetryMin = min(o.RetryMin, o.RetryMax)
	o.ApprovalPoll = cmp.Or(max(o.ApprovalPoll, 0), d.ApprovalPoll)
	o.ApprovalPoll = min(o.ApprovalPoll, o.Interval)
	if o.Logger == nil {
		o.Logger = d.Logger
	}
	if o.Load.Cache == nil {
		o.Load.Cache = config.NewLoadCache()
	}
	return nil
}
