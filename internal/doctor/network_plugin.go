package doctor

import (
	"context"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// knownPlugins are the DaemonSet names of network plugins, by the name
// they are known by (a DaemonSet named so, or so followed by "-…").
var knownPlugins = []struct{ daemonSet, name string }{
	{"kindnet", "kindnet"},
	{"kube-flannel", "flannel"},
	{"canal", "canal (Calico and flannel)"},
	{"calico-node", "Calico"},
	{"cilium", "Cilium"},
	{"kube-router", "kube-router"},
	{"weave-net", "Weave Net"},
	{"antrea-agent", "Antrea"},
	{"aws-node", "Amazon VPC CNI"},
	{"kube-ovn-cni", "Kube-OVN"},
	{"ovnkube-node", "OVN-Kubernetes"},
	{"azure-cns", "Azure CNI"},
	{"netd", "GKE netd"},
}

// pluginNamespaces are where the known plugins' pods run.
var pluginNamespaces = []string{"kube-system", "kube-flannel", "calico-system", "cilium"}

// networkPlugins names the network plugins whose DaemonSets' pods run in
// pluginNamespaces, read from the pods' owners (pcsync may list pods
// everywhere; it may not read DaemonSets); nil when it can tell none.
func networkPlugins(ctx context.Context, cs kubernetes.Interface) []string {
	found := map[string]string{} // plugin → where
	for _, ns := range pluginNamespaces {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		for _, p := range pods.Items {
			for _, o := range p.OwnerReferences {
				if o.Kind != "DaemonSet" {
					continue
				}
				where := ns + "/" + o.Name
				if n := pluginOf(o.Name); n != "" && (found[n] == "" || where < found[n]) {
					found[n] = where
				}
			}
		}
	}
	out := make([]string, 0, len(found))
	for n, where := range found {
		out = append(out, n+" (DaemonSet "+where+")")
	}
	sort.Strings(out)
	return out
}

// pluginOf returns the plugin a DaemonSet of that name runs, or "".
func pluginOf(daemonSet string) string {
	for _, k := range knownPlugins {
		if daemonSet == k.daemonSet || strings.HasPrefix(daemonSet, k.daemonSet+"-") {
			return k.name
		}
	}
	return ""
}
