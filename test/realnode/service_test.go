//go:build integration

package realnode

import (
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
)

// A pod on the real node reaches another pod through a ClusterIP Service:
// kube-proxy (iptables mode) runs beside the kubelet. The control is the backend's
// own pod IP; a Service with no endpoint answers nothing (the host routes the
// Service range to a bridge with no ports, so such a packet never leaves the machine).
func TestClusterIPService(t *testing.T) {
	c := testcluster.Get(t)
	cs, node, ns := setup(t)
	ctx := testContext(t)

	backend := podSpec(node, node.PauseImage(), []string{"/pause", "-listen", "tcp:8080", "-banner", "backend"}, corev1.RestartPolicyNever)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "backend", Labels: map[string]string{"app": "backend"}}, Spec: backend}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createPod(ctx, t, cs, ns, "client", podSpec(node, node.PauseImage(), nil, corev1.RestartPolicyNever), false)
	bp, err := waitPod(ctx, cs, ns, "backend", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" })
	if err != nil {
		t.Fatal(err)
	}
	svc := func(name string, sel map[string]string) *corev1.Service {
		s, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.ServiceSpec{Selector: sel, Ports: []corev1.ServicePort{{
				Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP,
			}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	up := svc("backend", map[string]string{"app": "backend"})
	none := svc("nobody", map[string]string{"app": "nobody"})
	direct := "tcp:" + net.JoinHostPort(bp.Status.PodIP, "8080")
	viaService := "tcp:" + net.JoinHostPort(up.Spec.ClusterIP, "80")
	empty := "tcp:" + net.JoinHostPort(none.Spec.ClusterIP, "80")

	// kube-proxy programs the Service when its EndpointSlice is ready: poll.
	var got map[string]string
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := podExec(ctx, c, ns, "client", "main", pauseDial(direct, viaService, empty))
		if err != nil {
			t.Fatal(err)
		}
		got = parseDials(t, out, []string{direct, viaService, empty})
		if got[viaService] == "ok backend" || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if got[direct] != "ok backend" {
		t.Fatalf("control: the backend pod itself at %s: %q, want ok backend", direct, got[direct])
	}
	if got[viaService] != "ok backend" {
		t.Errorf("the ClusterIP Service %s: %q, want ok backend (kube-proxy log: %s)", viaService, got[viaService], c.ComponentLogPath("kube-proxy"))
	}
	if strings.HasPrefix(got[empty], "ok") {
		t.Errorf("a Service without endpoints %s: %q, want no answer", empty, got[empty])
	}
}
