package paperclip

import (
	"cmp"
	"log/slog"
	"net/http"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"
)

// Options configure a Reconciler. Start from DefaultOptions.
type Options struct {
	// HTTPClient sends every request; nil means one with Timeout.
	HTTPClient *http.Client
	// Timeout bounds each request when HTTPClient is nil. Default 30s.
	Timeout time.Duration
	// Workers is how many companies are reconciled at once. Default 4.
	Workers int
	// UserAgent is sent with every request. Default "pcsync".
	UserAgent string
	// Getenv reads the environment variable named by Settings
	// spec.paperclip.tokenEnv. Default os.Getenv.
	Getenv func(string) string
	// Logger receives the reconciler's logs. Default slog.Default().
	Logger *slog.Logger
}

// DefaultOptions returns the defaults described on Options.
func DefaultOptions() Options {
	return Options{Timeout: 30 * time.Second, Workers: 4, UserAgent: "pcsync", Logger: slog.Default()}
}

// complete fills the zero fields with DefaultOptions' (negative Timeout and
// Workers too) and a nil Getenv with os.Getenv.
func (o *Options) complete() {
	d := DefaultOptions()
	o.Timeout = cmp.Or(max(o.Timeout, 0), d.Timeout)
	o.Workers = cmp.Or(max(o.Workers, 0), d.Workers)
	o.UserAgent = cmp.Or(o.UserAgent, d.UserAgent)
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	o.Logger = cmp.Or(o.Logger, d.Logger)
}

// ReconcileOptions configure one reconcile.
type ReconcileOptions struct {
	// DryRun plans and reads, and writes nothing (pcsync diff).
	DryRun bool
	// PauseMax is the pause guard, the same rule as the Kubernetes prune's
	// (apply.ApplyOptions.PruneMax): the most managed agents one reconcile
	// may pause, a count or a share of the managed agents of the opted-in
	// companies (rounded down), never less than PauseFloor. Default 25%.
	PauseMax intstr.IntOrString
	// PauseFloor is the least PauseMax allows, so that removing an agent or
	// two from a small company goes through. Default 3.
	PauseFloor int
	// AllowMassPause lifts the guard (pcsync --allow-mass-prune).
	AllowMassPause bool
}

// DefaultReconcileOptions returns the defaults described on ReconcileOptions.
func DefaultReconcileOptions() ReconcileOptions {
	return ReconcileOptions{PauseMax: intstr.FromString("25%"), PauseFloor: 3}
}
