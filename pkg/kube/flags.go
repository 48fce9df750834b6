package kube

import (
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Flags are the cluster-access flags shared by every command that talks to
// the API server.
type Flags struct {
	// Kubeconfig is a kubeconfig file; empty follows KUBECONFIG, then
	// ~/.kube/config, then the in-cluster config.
	Kubeconfig string
	// Context is the kubeconfig context to use; empty uses the current one.
	Context string
	// QPS is the client's sustained request rate to the API server.
	QPS float32
	// Burst is the client's request burst above QPS.
	Burst int
}

// DefaultFlags returns the defaults: the current context, and a client rate
// limit well above client-go's 5 QPS so that applying hundreds of objects is
// not throttled on the client side.
func DefaultFlags() Flags {
	return Flags{QPS: 100, Burst: 200}
}

// AddFlags registers the flags on fs.
func (f *Flags) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.Kubeconfig, "kubeconfig", f.Kubeconfig, "path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster)")
	fs.StringVar(&f.Context, "context", f.Context, "kubeconfig context to use")
	fs.Float32Var(&f.QPS, "kube-qps", f.QPS, "client requests per second to the API server")
	fs.IntVar(&f.Burst, "kube-burst", f.Burst, "client request burst to the API server")
}

// RESTConfig resolves the flags into a client configuration.
func (f Flags) RESTConfig() (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if f.Kubeconfig != "" {
		rules.ExplicitPath = f.Kubeconfig
	}
	overrides := &clientcmd.ConfigOverrides{CurrentContext: f.Context}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("cluster access: %w", err)
	}
	cfg.QPS = f.QPS
	cfg.Burst = f.Burst
	cfg.UserAgent = "pcsync"
	return cfg, nil
}
