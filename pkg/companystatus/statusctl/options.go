package statusctl

import (
	"cmp"
	"errors"
	"log/slog"
	"time"

	"k8s.io/client-go/util/workqueue"

	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/health"
)

// CondRecorded is the /readyz condition (not gating) the controller keeps
// when given a health checker: false while the cluster does not serve
// CompanyStatus (its CRD is not installed) or while a write fails.
const CondRecorded = "CompanyStatusRecorded"

// Options configure a Controller. Start from DefaultOptions.
type Options struct {
	// Namespace holds the CompanyStatus objects (the daemon's ApplySet
	// namespace). Required.
	Namespace string
	// Owner is the daemon's ApplySet ID, the objects' LabelOwner: the
	// controller deletes only its own objects, once their company left the
	// config. Required.
	Owner string
	// Shard is the shard the daemon serves: its companies are the
	// controller's.
	Shard config.Shard
	// Trigger asks the reconcile loop for a full reconcile at once (the
	// answer to a reconcile request). Required.
	Trigger func()
	// Workers write statuses at once. Default 4.
	Workers int
	// SyncTimeout bounds Run's wait for the first list. Default 1m.
	SyncTimeout time.Duration
	// Logger receives the controller's logs. Default slog.Default().
	Logger *slog.Logger
	// QueueMetrics receives the workqueue's metrics (queue
	// "company-status"); nil: none.
	QueueMetrics workqueue.MetricsProvider
	// Health, when set, holds CondRecorded.
	Health *health.Checker
	// Now is the clock of the times the controller writes. Default
	// time.Now.
	Now func() time.Time
}

// DefaultOptions returns the defaults of the optional fields.
func DefaultOptions() Options {
	return Options{Workers: 4, SyncTimeout: time.Minute, Logger: slog.Default(), Now: time.Now}
}

func (o *Options) complete() error {
	switch {
	case o.Namespace == "":
		return errors.New("company status: no namespace")
	case o.Owner == "":
		return errors.New("company status: no owner")
	case o.Trigger == nil:
		return errors.New("company status: no trigger")
	}
	d := DefaultOptions()
	o.Workers = cmp.Or(max(o.Workers, 0), d.Workers)
	o.SyncTimeout = cmp.Or(max(o.SyncTimeout, 0), d.SyncTimeout)
	o.Logger = cmp.Or(o.Logger, d.Logger)
	if o.Now == nil {
		o.Now = d.Now
	}
	return nil
}
