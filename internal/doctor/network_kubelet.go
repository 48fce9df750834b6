package doctor

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// kubeletPorts returns the ports the probe tries on its own node's IP:
// fixed (--kubelet-port) when set, else every kubelet port the Nodes
// report, sorted (the probe pod's node is not known before it runs). None,
// with why, when no Node says or pcsync may not list them.
func kubeletPorts(ctx context.Context, cs kubernetes.Interface, fixed int) ([]int, string) {
	if fixed > 0 {
		return []int{fixed}, ""
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Sprintf("the Nodes' kubelet ports are unknown (%v; --kubelet-port names one)", err)
	}
	var ports []int
	for _, n := range nodes.Items {
		if p := int(n.Status.DaemonEndpoints.KubeletEndpoint.Port); p > 0 && !slices.Contains(ports, p) {
			ports = append(ports, p)
		}
	}
	if len(ports) == 0 {
		return nil, "no Node reports its kubelet port (status.daemonEndpoints.kubeletEndpoint.Port; --kubelet-port names one)"
	}
	slices.Sort(ports)
	return ports, ""
}

// kubeletPort is the kubelet port of the probe pod's node, or 0 and why it
// is unknown.
type kubeletPort struct {
	port int
	why  string
}

// nodeKubeletPort returns the kubelet port of pod's node as its Node
// reports it, or fixed (--kubelet-port) when set.
func nodeKubeletPort(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod, fixed int) kubeletPort {
	switch {
	case fixed > 0:
		return kubeletPort{port: fixed}
	case pod == nil || pod.Spec.NodeName == "":
		return kubeletPort{why: "the probe pod's node is unknown"}
	}
	n, err := cs.CoreV1().Nodes().Get(ctx, pod.Spec.NodeName, metav1.GetOptions{})
	if err != nil {
		return kubeletPort{why: fmt.Sprintf("the kubelet port of node %s is unknown (%v; --kubelet-port names it)", pod.Spec.NodeName, err)}
	}
	if p := int(n.Status.DaemonEndpoints.KubeletEndpoint.Port); p > 0 {
		return kubeletPort{port: p}
	}
	return kubeletPort{why: fmt.Sprintf("Node %s reports no kubelet port (--kubelet-port names it)", n.Name)}
}
