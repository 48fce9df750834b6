// Command kube-controller-manager is the upstream kube-controller-manager, built from k8s.io/kubernetes for
// pcsync's local test control plane (see internal/testing/testcluster).
package main

import (
	"os"
	_ "time/tzdata" // CronJob time zones without a system tz database

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // --logging-format=json
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics on /metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // build info metric
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	os.Exit(cli.Run(app.NewControllerManagerCommand()))
}
