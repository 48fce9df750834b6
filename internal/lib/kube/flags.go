package kube

import (
	"errors"
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/flowcontrol"
)

// Default client-side rate limits. The API server protects itself with priority and
// fairness (and max-requests-inflight), and pcsync bounds its requests in flight with a
// worker pool (16 by default); these limits only stop a runaway client. They are far
// above client-go's 5/10 so that applying a fleet of hundreds of objects is bounded by
// the server, not by the client: the burst covers one request per object of ~120
// companies, and measured on a 2-core control plane 250/500 made a cold apply of 800
// objects 1.7 s slower than no limit, while 500/1000 costs nothing.
const (
	// DefaultQPS is the default sustained request rate of a pcsync client.
	DefaultQPS float32 = 500
	// DefaultBurst is the default number of requests a pcsync client may send at once
	// before DefaultQPS applies.
	DefaultBurst = 1000
)

// Flags are the cluster-access settings of a pcsync command. They follow kubectl: an
// explicit kubeconfig file, else the files named in $KUBECONFIG, else ~/.kube/config,
// else the in-cluster service-account configuration.
type Flags struct {
	// Kubeconfig is the path of a kubeconfig file. Empty means kubectl's loading
	// rules: $KUBECONFIG (a path list, merged), then ~/.kube/config, then in-cluster.
	Kubeconfig string
	// Context is the kubeconfig context to use. Empty means the current context.
	Context string
	// QPS is the client's sustained request rate. Zero means DefaultQPS; a negative
	// value disables client-side rate limiting.
	QPS float32
	// Burst is the number of requests the client may send at once before QPS applies.
	// Zero or negative means DefaultBurst.
	Burst int
}

// DefaultFlags returns Flags with the default rate limits and kubectl's loading rules.
func DefaultFlags() Flags {
	return Flags{QPS: DefaultQPS, Burst: DefaultBurst}
}

// AddFlags registers --kubeconfig, --context, --kube-qps and --kube-burst on fs (meant
// to be a command's persistent flag set), with f's current values as defaults.
func (f *Flags) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.Kubeconfig, "kubeconfig", f.Kubeconfig,
		"path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then in-cluster config)")
	fs.StringVar(&f.Context, "context", f.Context, "kubeconfig context to use (default: the current context)")
	fs.Float32Var(&f.QPS, "kube-qps", f.QPS,
		"client-side limit of requests per second to the API server (negative: no limit)")
	fs.IntVar(&f.Burst, "kube-burst", f.Burst, "client-side burst of requests to the API server")
}

// ClientConfig returns the kubeconfig loader for f, following kubectl's loading rules.
// RESTConfig uses it; callers that also need the namespace of the current context can
// use it directly.
func (f Flags) ClientConfig() clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if f.Kubeconfig != "" {
		rules.ExplicitPath = f.Kubeconfig
	}
	overrides := &clientcmd.ConfigOverrides{CurrentContext: f.Context}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
}

// RESTConfig returns the client configuration for f. Without a kubeconfig (no flag, no
// $KUBECONFIG, no ~/.kube/config) inside a pod it returns the in-cluster configuration.
// The returned config carries its own rate limiter, so every client built from it (and
// from copies of it) shares one QPS budget.
func (f Flags) RESTConfig() (*rest.Config, error) {
	cfg, err := f.ClientConfig().ClientConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			return nil, errors.New("cluster access: no Kubernetes cluster configured: pass --kubeconfig, " +
				"set KUBECONFIG, create ~/.kube/config, or run inside a pod")
		}
		return nil, fmt.Errorf("cluster access: %w", err)
	}
	f.ConfigureRateLimits(cfg)
	cfg.UserAgent = "pcsync"
	return cfg, nil
}

// ConfigureRateLimits sets QPS, Burst and one shared token bucket on cfg, so that all
// clients built from cfg draw on the same budget.
func (f Flags) ConfigureRateLimits(cfg *rest.Config) {
	qps, burst := f.QPS, f.Burst
	if qps == 0 {
		qps = DefaultQPS
	}
	if burst <= 0 {
		burst = DefaultBurst
	}
	cfg.QPS, cfg.Burst = qps, burst
	if qps < 0 {
		// rest.Config means "no limit" by a negative QPS when no RateLimiter is set.
		cfg.RateLimiter = nil
		return
	}
	cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(qps, burst)
}
