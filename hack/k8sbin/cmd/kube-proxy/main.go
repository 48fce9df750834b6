// Command kube-proxy is the upstream kube-proxy, built from k8s.io/kubernetes for the real
// node of pcsync's local test cluster (iptables mode: ClusterIP Services route from the
// node's pods). hack/kuberouter/build.sh builds it into its own cache directory, so that
// adding it did not change the key of the control-plane binaries (hack/k8sbin/build.sh).
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // --logging-format=json
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics on /metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // build info metric
	"k8s.io/kubernetes/cmd/kube-proxy/app"
)

func main() {
	os.Exit(cli.Run(app.NewProxyCommand()))
}
