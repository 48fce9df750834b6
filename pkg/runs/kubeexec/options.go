package kubeexec

import (
	"cmp"
	"context"
	"log/slog"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/pcsync/pcsync/pkg/introspect"
	"github.com/pcsync/pcsync/pkg/podsec"
)

// BuildOptions shape the Job and Secret of every run. The zero value of a
// field means its default (see DefaultBuildOptions).
type BuildOptions struct {
	// ServiceAccountName is the ServiceAccount of agent pods; the tenant
	// manifests create it. Default "paperclip-tenant-sa".
	ServiceAccountName string
	// SessionsClaimName is the PersistentVolumeClaim of a company with
	// sessions configured; the tenant manifests create it. Default
	// "paperclip-sessions".
	SessionsClaimName string
	// SessionsMountPath is where the sessions volume is mounted. Default
	// "/paperclip". HOME is then <SessionsMountPath>/home/<agent>.
	SessionsMountPath string
	// ContainerName is the name of the agent container. Default "agent".
	ContainerName string
	// WorkDir is the agent's working directory, an emptyDir. Default
	// "/workspace".
	WorkDir string
	// HomeDir is HOME, an emptyDir, when the company has no sessions
	// volume. Default "/home/agent".
	HomeDir string
	// CacheDir is an emptyDir for caches; XDG_CACHE_HOME points at it.
	// Default "/cache".
	CacheDir string
	// InputDir is where the per-run Secret's prompt file is mounted
	// (read-only). Default "/run/pcsync".
	InputDir string
	// Launcher is the command that starts the agent CLI with the prompt
	// file on its standard input. The CLI's argv is appended to it as
	// container args, and the prompt file's path is in the environment as
	// PCSYNC_PROMPT_FILE. The default, DefaultLauncher, needs /bin/sh in
	// the image; images without a shell can ship any small program that
	// opens $PCSYNC_PROMPT_FILE as stdin and execs its arguments.
	Launcher []string
	// UID is runAsUser, runAsGroup and fsGroup of agent pods. Default 1000.
	UID int64
	// ProxyGrace is how long, in egress mode proxy, the agent's pcsync
	// init waits for a proxy that is up to answer once before it starts
	// the CLI anyway: a new pod's egress may be allowed a moment after it
	// starts (an enforcer programs the pod's rules from its event), and
	// the CLI's first request must not meet a refusal. Default
	// DefaultProxyGrace; negative: no wait.
	ProxyGrace time.Duration
	// Inherited is what pcsync's own pod offers agent pods (see
	// pkg/introspect): its image pull secrets, added after the config's
	// own, and its DNS settings. Each run's config decides what is taken
	// (Settings spec.inherit). Empty outside a cluster.
	Inherited introspect.Inheritance
}

// DefaultLauncher runs the CLI through /bin/sh: it creates HOME (which may
// not exist yet on the sessions volume), then replaces itself with the CLI,
// whose standard input is the prompt file. "$@" keeps every argument intact;
// nothing of the prompt is ever on a command line.
var DefaultLauncher = []string{"/bin/sh", "-c", `mkdir -p "$HOME" 2>/dev/null; exec "$@" <"$PCSYNC_PROMPT_FILE"`, "pcsync-launch"}

// DefaultProxyGrace is BuildOptions.ProxyGrace's default.
const DefaultProxyGrace = 3 * time.Second

// DefaultBuildOptions returns the defaults of BuildOptions.
func DefaultBuildOptions() BuildOptions {
	return BuildOptions{
		ServiceAccountName: podsec.DefaultServiceAccount,
		SessionsClaimName:  "paperclip-sessions",
		SessionsMountPath:  "/paperclip",
		ContainerName:      "agent",
		WorkDir:            "/workspace",
		HomeDir:            "/home/agent",
		CacheDir:           "/cache",
		InputDir:           "/run/pcsync",
		Launcher:           append([]string(nil), DefaultLauncher...),
		UID:                podsec.DefaultUID,
		ProxyGrace:         DefaultProxyGrace,
	}
}

func (o *BuildOptions) complete() {
	d := DefaultBuildOptions()
	o.ServiceAccountName = cmp.Or(o.ServiceAccountName, d.ServiceAccountName)
	o.SessionsClaimName = cmp.Or(o.SessionsClaimName, d.SessionsClaimName)
	o.SessionsMountPath = cmp.Or(o.SessionsMountPath, d.SessionsMountPath)
	o.ContainerName = cmp.Or(o.ContainerName, d.ContainerName)
	o.WorkDir = cmp.Or(o.WorkDir, d.WorkDir)
	o.HomeDir = cmp.Or(o.HomeDir, d.HomeDir)
	o.CacheDir = cmp.Or(o.CacheDir, d.CacheDir)
	o.InputDir = cmp.Or(o.InputDir, d.InputDir)
	if len(o.Launcher) == 0 {
		o.Launcher = d.Launcher
	}
	o.UID = cmp.Or(max(o.UID, 0), d.UID)
	o.ProxyGrace = cmp.Or(o.ProxyGrace, d.ProxyGrace)
}

// Options configure the executor. The zero value of a field means its
// default (see DefaultOptions).
type Options struct {
	// Build shapes the Jobs and Secrets.
	Build BuildOptions
	// ProxyAddresses, when set, gives the runs of a company in egress mode
	// proxy its egress proxy's variables (package agentenv): the daemon
	// sets it (agentenv.Addresses). A run of such a company whose tenant
	// has no proxy Service fails, naming the Service. Nil: runs get no
	// proxy variables.
	ProxyAddresses ProxyAddresses
	// Hosts, when set, gives the pods of a company in egress mode proxy,
	// which have no cluster DNS, the address of the Paperclip server's
	// host in their /etc/hosts (agentenv.Hosts). Nil: none, and such a
	// pod cannot reach the server by a name.
	Hosts Hosts
	// StateDir is the daemon's state directory (runs.Layout.Dir); the
	// executor keeps a small marker per started run under
	// <StateDir>/runs/<name>/ so that a run whose Job vanished while no
	// daemon watched is reported, not started again. Required.
	StateDir string
	// Environ returns the daemon's environment as KEY=VALUE lines; the
	// adapter's env keys are taken from it. Default os.Environ.
	Environ func() []string
	// Logger receives the executor's logs; every line about a run carries
	// its runId. Default slog.Default().
	Logger *slog.Logger
	// UnschedulableGrace is how long a pod may stay unschedulable before
	// the run fails with errorCode unschedulable (a cluster autoscaler may
	// add a node meanwhile). Default 2 minutes.
	UnschedulableGrace time.Duration
	// QuotaGrace is how long the Job controller may be refused pods by a
	// ResourceQuota (other runs may finish and free it) before the run
	// fails with errorCode quota_exceeded. Refusals that cannot pass (a
	// LimitRange maximum, Pod Security) fail the run at once. Default 1
	// minute.
	QuotaGrace time.Duration
	// ConfigErrorGrace is how long the agent container may wait in
	// CreateContainerConfigError (e.g. a non-optional secretRef that does
	// not exist) before the run fails. Default 1 minute.
	ConfigErrorGrace time.Duration
	// LogReconnectDelay is the pause before a broken log stream is opened
	// again. Default 1 second.
	LogReconnectDelay time.Duration
	// DeleteTimeout bounds the Job deletion after the result is written
	// (the TTL is the backstop). Default 30 seconds.
	DeleteTimeout time.Duration
	// MaxConcurrentStarts is the ceiling of the start window: how many runs
	// may be being created (journal record, Job and Secret) at once. The
	// window starts at the ceiling and adapts to the API server: it halves
	// when the server answers 429 (API Priority and Fairness, max in
	// flight), a create times out or takes longer than SlowCreate; it then
	// grows by one per limit creates that succeed, and is back at the
	// ceiling after a minute without pushback. Runs past it wait
	// their turn in arrival order; the client's rate limit (--kube-qps,
	// --kube-burst) applies on top. Default 200, kube-apiserver's default
	// --max-mutating-requests-inflight: a burst goes out as fast as the
	// server takes mutations.
	MaxConcurrentStarts int
	// SlowCreate is how long a Job or Secret create may take before it
	// counts as the server's pushback, though it succeeded. Default 5
	// seconds.
	SlowCreate time.Duration
	// WindowMetrics, when set, receives the start window's changes.
	// Default none.
	WindowMetrics WindowMetrics
	// LogStreamsPerConnection is how many log streams share one HTTP/2
	// connection to the API server; more streams open more connections.
	// Keep it below the server's --http2-max-streams-per-connection.
	// Default 100.
	LogStreamsPerConnection int
	// Pods is the daemon's informer of pcsync's pods (podinformer), which
	// the executor shares with the daemon's other controllers: it adds its
	// index and handler, and removes the handler when it stops. Nil: an
	// informer of the executor's own, started and stopped with it.
	Pods cache.SharedIndexInformer
	// ProxyScale, when set, brings a company's egress proxy up for each
	// run (package egressproxy/scale): a run that finds it scaled to zero
	// waits for it in its pod (pcsync init --wait-proxy), or before its
	// Job for an image without pcsync. Nil: proxies are always up.
	ProxyScale ProxyScale
	// QueueMetrics, when set, receives the metrics of the executor's work
	// queue (depth, adds, latency, work duration), as client-go's
	// workqueue reports them. Default none.
	QueueMetrics workqueue.MetricsProvider
}

// ProxyAddresses knows the address of a tenant namespace's egress proxy
// Service (agentenv.Addresses).
type ProxyAddresses interface {
	ClusterIP(namespace string) (string, error)
}

// Hosts finds the /etc/hosts entries of a URL's host (agentenv.Hosts).
type Hosts interface {
	Aliases(ctx context.Context, rawURL string) ([]corev1.HostAlias, error)
}

// ProxyScale scales the tenants' egress proxies (scale.Controller).
type ProxyScale interface {
	// Need keeps namespace's proxy up for a run about to start, and
	// reports false while it is waking from zero.
	Need(namespace string) bool
	// Ready waits until namespace's proxy has an available pod.
	Ready(ctx context.Context, namespace string) error
}

// DefaultOptions returns the defaults of Options (StateDir has none).
func DefaultOptions() Options {
	return Options{
		Build:              DefaultBuildOptions(),
		Environ:            os.Environ,
		Logger:             slog.Default(),
		UnschedulableGrace: 2 * time.Minute,
		QuotaGrace:         time.Minute,
		ConfigErrorGrace:   time.Minute,
		LogReconnectDelay:  time.Second,
		DeleteTimeout:      30 * time.Second,

		MaxConcurrentStarts:     200,
		SlowCreate:              5 * time.Second,
		LogStreamsPerConnection: 100,
	}
}

func (o *Options) complete() {
	d := DefaultOptions()
	o.Build.complete()
	if o.Environ == nil {
		o.Environ = d.Environ
	}
	if o.Logger == nil {
		o.Logger = d.Logger
	}
	o.UnschedulableGrace = cmp.Or(max(o.UnschedulableGrace, 0), d.UnschedulableGrace)
	o.QuotaGrace = cmp.Or(max(o.QuotaGrace, 0), d.QuotaGrace)
	o.ConfigErrorGrace = cmp.Or(max(o.ConfigErrorGrace, 0), d.ConfigErrorGrace)
	o.LogReconnectDelay = cmp.Or(max(o.LogReconnectDelay, 0), d.LogReconnectDelay)
	o.SlowCreate = cmp.Or(max(o.SlowCreate, 0), d.SlowCreate)
	o.DeleteTimeout = cmp.Or(max(o.DeleteTimeout, 0), d.DeleteTimeout)
	o.MaxConcurrentStarts = cmp.Or(max(o.MaxConcurrentStarts, 0), d.MaxConcurrentStarts)
	o.LogStreamsPerConnection = cmp.Or(max(o.LogStreamsPerConnection, 0), d.LogStreamsPerConnection)
}
