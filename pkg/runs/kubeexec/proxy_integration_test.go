//go:build integration

package kubeexec

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/pkg/egressproxy/agentenv"
	"github.com/pcsync/pcsync/pkg/egressproxy/allow"
	"github.com/pcsync/pcsync/pkg/render"
	"github.com/pcsync/pcsync/pkg/result"
)

// proxyCompany puts the test's company in egress mode proxy (the schema's
// default; newEnv's is standard).
var proxyCompany = map[string]any{"egress": map[string]any{"mode": "proxy"}}

// TestProxyModeTenant: a company in egress mode proxy (the default) is
// applied through the real API server: the egress proxy's objects are
// accepted, its pod passes Pod Security restricted and the tenant's
// ResourceQuota admits it (and counts it); the proxy Service's ClusterIP
// is known from the watch, and a run's Job gets HTTPS_PROXY, HTTP_PROXY,
// NO_PROXY (and lower case) naming the agent and that address, none of
// them from the run's Secret.
func TestProxyModeTenant(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{Labels: testcluster.RunForever(), Company: proxyCompany})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// The proxy's pod: created by the Deployment controller, admitted,
	// Running on kwok, counted by the quota.
	var proxyPod *corev1.Pod
	e.waitUntil("the egress proxy's pod to run", func() bool {
		pods, err := e.cs.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: agentpod.LabelRole + "=" + agentpod.RoleEgressProxy})
		if err != nil || len(pods.Items) != 1 || pods.Items[0].Status.Phase != corev1.PodRunning {
			return false
		}
		proxyPod = &pods.Items[0]
		return true
	})
	if c := proxyPod.Spec.Containers[0]; c.Resources.Requests.Cpu().String() != "100m" || c.SecurityContext == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
		t.Errorf("proxy container: requests %v, securityContext %+v; want the rendered 100m and a read-only root", c.Resources.Requests, c.SecurityContext)
	}
	if proxyPod.Spec.AutomountServiceAccountToken == nil || *proxyPod.Spec.AutomountServiceAccountToken {
		t.Error("the proxy's pod mounts a ServiceAccount token")
	}
	e.waitUntil("the quota to count the proxy's pod", func() bool {
		q, err := e.cs.CoreV1().ResourceQuotas(e.ns).Get(ctx, render.QuotaName, metav1.GetOptions{})
		if err != nil {
			return false
		}
		used := q.Status.Used[corev1.ResourceRequestsCPU]
		pods := q.Status.Used[corev1.ResourcePods]
		return pods.Value() >= 1 && used.MilliValue() >= 100
	})

	// The proxy Service's ClusterIP, from the watch.
	svc, err := e.cs.CoreV1().Services(e.ns).Get(ctx, allow.ProxyName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	addrs := agentenv.NewAddresses(e.cs)
	if err := addrs.Start(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	ip, err := addrs.ClusterIP(e.ns)
	if err != nil || ip != svc.Spec.ClusterIP || ip == "" {
		t.Fatalf("ClusterIP(%s) = %q, %v; want the Service's %q", e.ns, ip, err, svc.Spec.ClusterIP)
	}

	// A run's Job carries the proxy variables.
	e.drop("proxy-1", nil)
	d := e.startDaemon(false, func(o *Options) { o.ProxyAddresses = addrs })
	defer d.stop(t)
	var job string
	e.waitUntil("the run's Job", func() bool {
		job = e.jobName("proxy-1")
		_, err := e.cs.BatchV1().Jobs(e.ns).Get(ctx, job, metav1.GetOptions{})
		return err == nil
	})
	j, err := e.cs.BatchV1().Jobs(e.ns).Get(ctx, job, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, v := range j.Spec.Template.Spec.Containers[0].Env {
		for _, n := range agentenv.Names {
			if v.Name == n {
				if v.ValueFrom != nil {
					t.Errorf("%s comes from a Secret; want a plain value (it is no secret)", n)
				}
				got[n] = v.Value
			}
		}
	}
	proxy := "http://" + agentName + "@" + ip + ":3128"
	no := "paperclip-server.paperclip.svc,localhost,127.0.0.1,::1,.svc,.cluster.local," + ip
	want := map[string]string{"HTTPS_PROXY": proxy, "HTTP_PROXY": proxy, "NO_PROXY": no, "https_proxy": proxy, "http_proxy": proxy, "no_proxy": no}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the Job's proxy variables (-want +got):\n%s", diff)
	}
}

// TestProxyModeWithoutService: a run of a company in egress mode proxy
// whose tenant has no proxy Service fails at once, naming the Service and
// saying the tenant is not applied; no Job is created.
func TestProxyModeWithoutService(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{Labels: testcluster.RunForever(), Company: proxyCompany})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := e.cs.CoreV1().Services(e.ns).Delete(ctx, allow.ProxyName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	addrs := agentenv.NewAddresses(e.cs)
	if err := addrs.Start(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	e.waitUntil("the watch to lose the Service", func() bool {
		_, err := addrs.ClusterIP(e.ns)
		return err != nil
	})
	e.drop("noproxy-1", nil)
	d := e.startDaemon(true, func(o *Options) { o.ProxyAddresses = addrs })
	d.wait(t)
	res := e.result("noproxy-1")
	msg := deref(res.ErrorMessage)
	if res.Status != result.StatusFailed || deref(res.ErrorCode) != result.ErrInvalidRequest ||
		!strings.Contains(msg, "Service/"+e.ns+"/"+allow.ProxyName) || !strings.Contains(msg, "not applied") {
		t.Fatalf("result: %s %s %q; want failed (invalid_request), naming Service/%s/%s and saying the tenant is not applied",
			res.Status, deref(res.ErrorCode), msg, e.ns, allow.ProxyName)
	}
	if _, err := e.cs.BatchV1().Jobs(e.ns).Get(ctx, e.jobName("noproxy-1"), metav1.GetOptions{}); err == nil {
		t.Error("a Job was created")
	}
}
