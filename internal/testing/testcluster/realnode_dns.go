package testcluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// ClusterDomain is the real node's cluster domain (the kubelet's clusterDomain,
// CoreDNS's kubernetes zone).
const ClusterDomain = "cluster.local"

// The cluster DNS's objects. The pod carries the labels a cluster's CoreDNS has
// (k8s-app: kube-dns in kube-system), so that a NetworkPolicy written for a real
// cluster selects it; the Service also selects by coreDNSLabel, so that a test's
// stand-in labelled k8s-app: kube-dns never becomes one of its endpoints.
const (
	coreDNSName  = "coredns"
	coreDNSLabel = "testcluster.pcsync.io/coredns"
	kubeDNSName  = "kube-dns"
	// coreDNSBinMount is where the pod finds the add-on directory (hostPath,
	// read-only): CoreDNS runs from the binary `make k8sbin` cached, with no
	// image of its own.
	coreDNSBinMount = "/addons"
)

// coreDNSLabels are the CoreDNS pod's labels.
func coreDNSLabels() map[string]string {
	return map[string]string{"k8s-app": kubeDNSName, coreDNSLabel: "true"}
}

// Corefile serves ClusterDomain (and reverse lookups of Service and pod IPs)
// from the API server with the kubernetes plugin, and refuses every other name:
// nothing is forwarded, so a pod's DNS query never leaves the machine.
const corefile = `cluster.local:53 in-addr.arpa:53 ip6.arpa:53 {
    errors
    log
    ready :8181
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        pods insecure
        ttl 5
    }
}
.:53 {
    errors
    log
    template ANY ANY {
        rcode REFUSED
    }
}
`

// ClusterDNS returns the cluster DNS address pods get in their resolv.conf
// (dnsPolicy ClusterFirst): the ClusterIP of the Service kube-system/kube-dns,
// whose endpoint is the CoreDNS pod on this node.
func (n *RealNode) ClusterDNS() string { return clusterDNSIP }

// dns starts the cluster DNS: CoreDNS in a pod on the node (kube-system,
// labels k8s-app: kube-dns), its Corefile, service account and rights, and the
// Service kube-system/kube-dns at the kubelet's clusterDNS address; it returns
// once the Service answers a query from this host.
func (s *nodeStart) dns(ctx context.Context) error {
	if err := s.c.coreDNSObjects(ctx); err != nil {
		return fmt.Errorf("cluster DNS: %w", err)
	}
	o := s.o
	abs, err := filepath.Abs(o.AddonBinDir) // a hostPath is absolute
	if err != nil {
		return fmt.Errorf("cluster DNS: %w", err)
	}
	o.AddonBinDir = abs
	pod := coreDNSPod(o, s.n.pauseImage)
	pods := s.c.client.CoreV1().Pods(metav1.NamespaceSystem)
	if err := pods.Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("cluster DNS: Pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("cluster DNS: Pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	if err := s.waitDNS(ctx); err != nil {
		return fmt.Errorf("cluster DNS: %w", err)
	}
	s.logf("testcluster: real node: CoreDNS answering on %s after %s", clusterDNSIP, s.since())
	return nil
}

// coreDNSObjects creates CoreDNS's ConfigMap, service account, the rights its
// kubernetes plugin needs (list and watch Services, EndpointSlices, Pods and
// Namespaces) and the Service kube-system/kube-dns at clusterDNSIP, port 53
// over UDP and TCP. Objects left by an earlier start are kept as they are.
func (c *Cluster) coreDNSObjects(ctx context.Context) error {
	sys := metav1.NamespaceSystem
	user := "system:serviceaccount:" + sys + ":" + coreDNSName
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "pcsync-testcluster:coredns"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"endpoints", "services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
	}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: sys, Name: coreDNSName}}}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: kubeDNSName, Namespace: sys, Labels: map[string]string{"k8s-app": kubeDNSName}},
		Spec: corev1.ServiceSpec{ClusterIP: clusterDNSIP, Selector: coreDNSLabels(), Ports: []corev1.ServicePort{
			{Name: "dns", Port: 53, TargetPort: intstr.FromInt32(53), Protocol: corev1.ProtocolUDP},
			{Name: "dns-tcp", Port: 53, TargetPort: intstr.FromInt32(53), Protocol: corev1.ProtocolTCP},
		}},
	}
	creates := []struct {
		what   string
		create func() error
	}{
		{"ConfigMap " + sys + "/" + coreDNSName, func() error {
			_, err := c.client.CoreV1().ConfigMaps(sys).Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: coreDNSName, Namespace: sys},
				Data:       map[string]string{"Corefile": corefile}}, metav1.CreateOptions{})
			return err
		}},
		{"ServiceAccount " + sys + "/" + coreDNSName, func() error {
			_, err := c.client.CoreV1().ServiceAccounts(sys).Create(ctx, &corev1.ServiceAccount{
				ObjectMeta: metav1.ObjectMeta{Name: coreDNSName, Namespace: sys}}, metav1.CreateOptions{})
			return err
		}},
		{"ClusterRole " + role.Name + " for " + user, func() error {
			_, err := c.client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{})
			return err
		}},
		{"ClusterRoleBinding " + binding.Name, func() error {
			_, err := c.client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{})
			return err
		}},
		{"Service " + sys + "/" + kubeDNSName, func() error {
			_, err := c.client.CoreV1().Services(sys).Create(ctx, svc, metav1.CreateOptions{})
			return err
		}},
	}
	for _, o := range creates {
		if err := o.create(); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("%s: %w", o.what, err)
		}
	}
	return nil
}

// coreDNSPod is CoreDNS's pod, bound to the node (no scheduler, every taint
// tolerated): the cached binary from the add-on directory (hostPath,
// read-only) in the pause image, as nobody with no capability (the sysctl
// net.ipv4.ip_unprivileged_port_start lets it bind port 53), on a read-only
// root filesystem; ready when its ready plugin says so. Its own lookups (it
// makes none) would use the node's resolv.conf, which names no server.
func coreDNSPod(o RealNodeOptions, image string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: coreDNSName, Namespace: metav1.NamespaceSystem, Labels: coreDNSLabels()},
		Spec: corev1.PodSpec{
			NodeName:                      o.Name,
			ServiceAccountName:            coreDNSName,
			DNSPolicy:                     corev1.DNSDefault,
			TerminationGracePeriodSeconds: ptr.To(int64(1)),
			Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To(int64(65534)), RunAsGroup: ptr.To(int64(65534)),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
				Sysctls:        []corev1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: "53"}},
			},
			Containers: []corev1.Container{{
				Name:            coreDNSName,
				Image:           image,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         []string{coreDNSBinMount + "/coredns", "-conf", "/etc/coredns/Corefile"},
				Ports: []corev1.ContainerPort{
					{Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP},
					{Name: "dns-tcp", ContainerPort: 53, Protocol: corev1.ProtocolTCP},
				},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(8181)}},
					PeriodSeconds: 1,
				},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					ReadOnlyRootFilesystem:   ptr.To(true),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "bin", MountPath: coreDNSBinMount, ReadOnly: true},
					{Name: "config", MountPath: "/etc/coredns", ReadOnly: true},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "bin", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
					Path: o.AddonBinDir, Type: ptr.To(corev1.HostPathDirectory)}}},
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: coreDNSName}}}},
			},
		},
	}
}

// waitDNS waits (up to a minute) until the Service answers, from this host, a
// query for the kubernetes Service's name with its ClusterIP: the pod is
// Ready, its EndpointSlice is written and kube-proxy has programmed it. It
// fails early with the pod's state and log if the pod ends.
func (s *nodeStart) waitDNS(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	name := "kubernetes.default.svc." + ClusterDomain + "."
	var last string
	for {
		addrs, err := lookupAt(ctx, net.JoinHostPort(clusterDNSIP, "53"), name)
		switch {
		case err == nil && slices.Contains(addrs, "10.0.0.1"):
			return nil
		case err == nil:
			last = fmt.Sprintf("%s answered %v, want 10.0.0.1", name, addrs)
		default:
			last = err.Error()
		}
		if why := s.c.podFailure(ctx, metav1.NamespaceSystem, coreDNSName); why != "" {
			return fmt.Errorf("CoreDNS pod: %s", why)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s:53 does not answer: %s (%w); CoreDNS pod: %s", clusterDNSIP, last, ctx.Err(),
				s.c.podState(metav1.NamespaceSystem, coreDNSName))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// saveCoreDNSLog copies the CoreDNS pod's log (a line per query: the log
// plugin) to <work dir>/logs/coredns.log before the drain deletes the pod and
// the kubelet its log; a failure is only reported.
func (c *Cluster) saveCoreDNSLog() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	data, err := c.client.CoreV1().Pods(metav1.NamespaceSystem).GetLogs(coreDNSName, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err == nil {
		err = os.WriteFile(c.path("logs", "coredns.log"), data, 0o644)
	}
	if err != nil {
		c.opts.Logf("testcluster: real node: CoreDNS's log not saved: %v", err)
	}
}

// lookupAt resolves name with the DNS server at addr over UDP, as a pod's
// resolver would.
func lookupAt(ctx context.Context, addr, name string) ([]string, error) {
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", addr)
	}}
	qctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return r.LookupHost(qctx, name)
}

// podFailure describes a pod that ended or whose container keeps failing;
// empty while it may still come up.
func (c *Cluster) podFailure(ctx context.Context, ns, name string) string {
	p, err := c.client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
		return "phase " + string(p.Status.Phase)
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.RestartCount > 2 {
			return fmt.Sprintf("container %s restarted %d times (last: %s)", cs.Name, cs.RestartCount, terminated(cs))
		}
	}
	return ""
}

// podState describes a pod for an error message: its phase and its
// containers' states.
func (c *Cluster) podState(ns, name string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p, err := c.client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	parts := []string{"phase " + string(p.Status.Phase)}
	for _, cs := range p.Status.ContainerStatuses {
		state := "running"
		switch {
		case cs.State.Waiting != nil:
			state = "waiting: " + cs.State.Waiting.Reason + " " + cs.State.Waiting.Message
		case cs.State.Terminated != nil:
			state = terminated(cs)
		}
		parts = append(parts, fmt.Sprintf("%s ready=%v restarts=%d %s", cs.Name, cs.Ready, cs.RestartCount, state))
	}
	return strings.Join(parts, "; ")
}

// terminated describes a container's last termination.
func terminated(cs corev1.ContainerStatus) string {
	t := cs.State.Terminated
	if t == nil {
		t = cs.LastTerminationState.Terminated
	}
	if t == nil {
		return "none"
	}
	return "exit " + strconv.Itoa(int(t.ExitCode)) + " " + t.Reason + " " + strings.TrimSpace(t.Message)
}
