//go:build integration

package realnode

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/internal/testing/testnet"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/runs/kubeexec"
	"github.com/pcsync/pcsync/pkg/runs/spool"
	"github.com/pcsync/pcsync/pkg/sandbox"
	"github.com/pcsync/pcsync/pkg/sandbox/pool"
)

// The stand-in Paperclip server of the enforcement tests: Settings spec.server
// selects it; it listens on the server port and on serverOtherPort (a database's).
const (
	serverPort      = 3100
	serverOtherPort = 5432
	serverApp       = "paperclip-server-standin"
	// allowedCIDRPort is the port of tenant a's allowCidrs entry (198.51.100.0/24):
	// not 443, so that standard mode's rule for any public address on TCP 443 does
	// not open it too.
	allowedCIDRPort = 8443
)

// enfTarget is one destination of the enforcement matrix: spec is the probe's
// NET:HOST:PORT; a reached target answers banner ("" for a TLS server, which says
// nothing first: connecting is reaching it).
type enfTarget struct {
	name, spec, banner string
}

// enfProber is a pod the matrix probes from: probe runs the dial command in it.
type enfProber struct {
	name, ns, pod, ip string
	probe             func(ctx context.Context, specs []string) (string, error)
}

// enfEnv is the world of the enforcement tests: two tenants (a and b) rendered and
// applied by pcsync from one config, a stand-in kube-dns in kube-system, a
// stand-in Paperclip server, a namespace without policies, and a network namespace
// holding the "public", allowCidrs and metadata stand-in addresses.
type enfEnv struct {
	c               *testcluster.Cluster
	node            *testcluster.RealNode
	p               pushed
	tn              *testnet.Net
	dir, spool      string
	slugA, slugB    string
	nsA, nsB        string
	serverNS, ctlNS string
	model           *config.Model
	targets         []enfTarget
}

// writeConfig writes the config: tenant a allows 198.51.100.0/24 on TCP
// allowedCIDRPort in egress mode mode; both agents run on the real node; a keeps a warm pool
// of one when pool is set.
func (e *enfEnv) writeConfig(t *testing.T, prefix, mode string, pool bool) {
	t.Helper()
	tol := e.node.Toleration()
	sel, _ := json.Marshal(e.node.NodeSelector())
	agent := fmt.Sprintf("    - {name: pinned, adapter: claude_local, concurrency: 4, nodeSelector: %s, tolerations: [{key: %q, operator: %s, effect: %s}]}\n",
		sel, tol.Key, tol.Operator, tol.Effect)
	settings := fmt.Sprintf("apiVersion: pcsync.io/v1alpha1\nkind: Settings\nmetadata: {name: s}\nspec:\n"+
		"  namespacePrefix: %s\n  images: {registry: %s, allowList: ['%s/*/*']}\n"+
		"  server: {namespace: %s, podSelector: {app: %s}, port: %d}\n"+
		"  defaults:\n    limitRange: {min: {cpu: 10m, memory: 16Mi}}\n    resources: {requests: {cpu: 20m, memory: 32Mi}, limits: {cpu: 200m, memory: 128Mi}}\n",
		prefix, e.p.Registry, e.node.Registry().Host(), e.serverNS, serverApp, serverPort)
	warm := ""
	if pool {
		warm = "  sandbox:\n    warmPool:\n      - {adapterType: claude_local, count: 1, agent: pinned}\n"
	}
	companyA := fmt.Sprintf("apiVersion: pcsync.io/v1alpha1\nkind: Company\nmetadata: {name: %q}\nspec:\n  id: company-%s\n  agents:\n%s"+
		"  egress:\n    mode: %s\n    allowCidrs: [{cidr: 198.51.100.0/24, ports: [%d], protocol: TCP}]\n%s",
		e.slugA, e.slugA, agent, mode, allowedCIDRPort, warm)
	companyB := fmt.Sprintf("apiVersion: pcsync.io/v1alpha1\nkind: Company\nmetadata: {name: %q}\nspec:\n  id: company-%s\n  agents:\n%s"+
		"  egress:\n    mode: %s\n", e.slugB, e.slugB, agent, mode)
	for name, text := range map[string]string{"settings.yaml": settings, "a.yaml": companyA, "b.yaml": companyB} {
		if err := os.WriteFile(filepath.Join(e.dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m, err := loadConfig(e.dir)
	if err != nil {
		t.Fatal(err)
	}
	e.model = m
}

// newEnfEnv builds the world in egress mode mode (the tenants applied, the stand-ins
// Running, the network namespace listening) with the enforcer off, so that the
// control matrix runs first.
func newEnfEnv(t *testing.T, mode string) *enfEnv {
	t.Helper()
	c := testcluster.Get(t)
	e := &enfEnv{c: c, node: c.RealNode(), p: pushImages(t), dir: t.TempDir(), spool: t.TempDir()}
	if !e.node.NetworkPolicy() {
		t.Fatal("the real node does not enforce NetworkPolicies: TestMain sets RealNodeOptions.NetworkPolicy")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := e.node.StopNetworkPolicy(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.node.StartNetworkPolicy(context.Background()); err != nil {
			t.Errorf("restart the enforcer for the next tests: %v", err)
		}
	})
	e.nsA, e.nsB = c.Namespace(t, "enf", nil), c.Namespace(t, "enf", nil)
	e.slugA, e.slugB = e.nsA[strings.LastIndexByte(e.nsA, '-')+1:], e.nsB[strings.LastIndexByte(e.nsB, '-')+1:]
	e.serverNS, e.ctlNS = c.Namespace(t, "enf-server", nil), c.Namespace(t, "enf-control", restricted)
	e.writeConfig(t, e.nsA[:strings.LastIndexByte(e.nsA, '-')+1], mode, true)
	applyTenant(ctx, t, c, e.model)
	e.startNetns(t)
	e.startStandIns(ctx, t)
	return e
}

// startNetns creates the network namespace with its listeners.
func (e *enfEnv) startNetns(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tn := newTestNet(ctx, t)
	e.tn = tn
	for _, l := range []struct{ name, addr, port string }{
		{"public-443", testnet.PublicAddress, "443"},
		{"public-80", testnet.PublicAddress, "80"},
		{"allowed-cidr", testnet.AllowedAddress, strconv.Itoa(allowedCIDRPort)},
		{"metadata-80", testnet.MetadataStandIn, "80"},
		{"metadata-443", testnet.MetadataStandIn, "443"},
	} {
		ln, err := tn.Listen("tcp4", net.JoinHostPort(l.addr, l.port))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ln.Close() })
		testnet.ServeBanner(ln, l.name)
		e.targets = append(e.targets, enfTarget{name: l.name, spec: "tcp:" + net.JoinHostPort(l.addr, l.port), banner: l.name})
	}
}

// pausePod creates a pod from the pause image on the real node with args and
// labels, waits until it runs, and returns it.
func (e *enfEnv) pausePod(ctx context.Context, t *testing.T, ns, name string, labels map[string]string, args ...string) *corev1.Pod {
	t.Helper()
	cmd := append([]string{"/pause"}, args...)
	spec := podSpec(e.node, e.node.PauseImage(), cmd, corev1.RestartPolicyNever)
	if len(args) > 0 && args[0] == "-listen" && ns == metav1.NamespaceSystem {
		// Port 53 without a capability: the pod's own network namespace lets any
		// user bind low ports.
		spec.SecurityContext.Sysctls = []corev1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: "0"}}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: spec}
	cs := e.c.Client()
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod %s/%s: %v", ns, name, err)
	}
	if ns == metav1.NamespaceSystem {
		t.Cleanup(func() {
			_ = cs.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))})
		})
	}
	got, err := waitPod(ctx, cs, ns, name, func(p *corev1.Pod) bool {
		return p.Status.Phase != corev1.PodPending && p.Status.PodIP != ""
	})
	if err != nil || got.Status.Phase != corev1.PodRunning {
		t.Fatalf("pod %s/%s: %v %s", ns, name, err, describe(got))
	}
	return got
}

// startStandIns starts kube-dns's and the server's stand-ins, one listening pod in
// each tenant, an agent-labelled pod in tenant b and a control pod, and adds the
// node's own targets (the kubelet port on the node IP, the API server as pods reach
// it).
func (e *enfEnv) startStandIns(ctx context.Context, t *testing.T) {
	t.Helper()
	dns := e.pausePod(ctx, t, metav1.NamespaceSystem, "kube-dns-standin-"+e.slugA, map[string]string{"k8s-app": "kube-dns"},
		"-listen", "udp:53", "-listen", "tcp:53", "-banner", "dns")
	srv := e.pausePod(ctx, t, e.serverNS, "server", map[string]string{"app": serverApp},
		"-listen", "tcp:"+strconv.Itoa(serverPort), "-listen", "tcp:"+strconv.Itoa(serverOtherPort), "-banner", "server")
	a := e.pausePod(ctx, t, e.nsA, "a-target", nil, "-listen", "tcp:8080", "-banner", "tenant-a")
	b := e.pausePod(ctx, t, e.nsB, "b-target", nil, "-listen", "tcp:8080", "-banner", "tenant-b")
	node, err := e.c.Client().CoreV1().Nodes().Get(ctx, e.node.Name(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubeletPort := strconv.Itoa(int(node.Status.DaemonEndpoints.KubeletEndpoint.Port))
	apiHost, apiPort := e.node.APIServerHost()
	hp := func(ip string, port int) string { return net.JoinHostPort(ip, strconv.Itoa(port)) }
	e.targets = append(e.targets,
		enfTarget{"dns-udp", "udp:" + hp(dns.Status.PodIP, 53), "dns"},
		enfTarget{"dns-tcp", "tcp:" + hp(dns.Status.PodIP, 53), "dns"},
		enfTarget{"server", "tcp:" + hp(srv.Status.PodIP, serverPort), "server"},
		enfTarget{"server-other-port", "tcp:" + hp(srv.Status.PodIP, serverOtherPort), "server"},
		enfTarget{"tenant-a-pod", "tcp:" + hp(a.Status.PodIP, 8080), "tenant-a"},
		enfTarget{"tenant-b-pod", "tcp:" + hp(b.Status.PodIP, 8080), "tenant-b"},
		enfTarget{"node-kubelet", "tcp:" + net.JoinHostPort(e.node.NodeIP(), kubeletPort), ""},
		enfTarget{"apiserver", "tcp:" + net.JoinHostPort(apiHost, apiPort), ""},
	)
}

// podProber probes from a running pod's first container through the API's exec,
// with the pause probe (pause) or the Node.js one (pcsync's images).
func (e *enfEnv) podProber(name string, pod *corev1.Pod, pause bool) enfProber {
	return enfProber{name: name, ns: pod.Namespace, pod: pod.Name, ip: pod.Status.PodIP,
		probe: func(ctx context.Context, specs []string) (string, error) {
			cmd := nodeDial(specs...)
			if pause {
				cmd = pauseDial(specs...)
			}
			return podExec(ctx, e.c, pod.Namespace, pod.Name, pod.Spec.Containers[0].Name, cmd)
		}}
}

// controlProbers are pods without an agent's policies: one in a namespace without
// policies, and an agent-labelled pod of tenant b (its own tenant's policies).
func (e *enfEnv) controlProbers(ctx context.Context, t *testing.T) (control, otherTenant enfProber) {
	t.Helper()
	ctl := e.pausePod(ctx, t, e.ctlNS, "control", nil)
	bAgent := e.pausePod(ctx, t, e.nsB, "b-agent", map[string]string{agentpod.LabelRole: agentpod.RoleAgent})
	return e.podProber("control", ctl, true), e.podProber("tenant-b-agent", bAgent, true)
}

// manager starts pcsync's sandbox Manager on tenant a (its warm pool refills at once).
func (e *enfEnv) manager(t *testing.T) *sandbox.Manager {
	t.Helper()
	o := sandbox.DefaultOptions(t.TempDir())
	o.Pool.Lease.Namespace = "default" // the pools' Lease: a namespace every cluster has
	o.ReadyTimeout = 3 * time.Minute
	o.Agents = agentIDs{pinnedAgentID: "pinned"}
	o.Pool.Resync = 200 * time.Millisecond
	o.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	m, err := sandbox.New(context.Background(), e.c.RESTConfig(), func() *config.Model { return e.model }, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// leaseProber acquires a lease for tenant a's agent and probes through the
// Manager's execute. The lease claims the warm member when it is Ready, or
// starts a cold pod; the case holds either way (both carry the agent's role and
// its policies). A lease is ready when its command stream answers, which the
// kubelet allows before it posts the pod's IP: the prober waits for the IP.
func (e *enfEnv) leaseProber(ctx context.Context, t *testing.T, m *sandbox.Manager) enfProber {
	t.Helper()
	info, err := m.Acquire(ctx, sandbox.AcquireParams{Config: sandbox.EnvironmentConfig{Company: e.slugA},
		AdapterType: "claude_local", AgentID: pinnedAgentID, RunID: "enforce-lease"})
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	t.Cleanup(func() { _, _ = m.Release(context.Background(), sandbox.ReleaseParams{ID: info.ID, Cancel: true}) })
	pod := waitPodIP(ctx, t, e.c.Client(), e.nsA, info.ID, time.Minute)
	return enfProber{name: "lease", ns: e.nsA, pod: info.ID, ip: pod.Status.PodIP,
		probe: func(ctx context.Context, specs []string) (string, error) {
			r, err := m.Execute(ctx, sandbox.ExecParams{LeaseID: info.ID, Command: "node",
				Args: append([]string{"-e", nodeDialScript}, specs...), Timeout: time.Minute}, nil)
			if err != nil {
				return "", err
			}
			if r.ExitCode == nil || *r.ExitCode != 0 {
				return r.Stdout, fmt.Errorf("probe in lease %s: exit %v: %s", info.ID, r.ExitCode, r.Stderr)
			}
			return r.Stdout, nil
		}}
}

// memberProber waits for an unclaimed warm pool member of tenant a (no agent role:
// only the deny-all selects it) and probes from it.
func (e *enfEnv) memberProber(ctx context.Context, t *testing.T) enfProber {
	t.Helper()
	deadline := time.Now().Add(4 * time.Minute)
	for {
		l, err := e.c.Client().CoreV1().Pods(e.nsA).List(ctx, metav1.ListOptions{LabelSelector: pool.Label})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range l.Items {
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" && p.Labels[agentpod.LabelRole] == "" {
				return e.podProber("pool-member", &p, false)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no Running unclaimed pool member in %s after 4 minutes", e.nsA)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// jobProber runs tenant a's agent through pcsync's Kubernetes executor (a run
// whose stand-in CLI sleeps) and probes from its Job's pod.
func (e *enfEnv) jobProber(ctx context.Context, t *testing.T) enfProber {
	t.Helper()
	state := t.TempDir()
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	opts := kubeexec.DefaultOptions()
	opts.StateDir, opts.Logger = state, logger
	opts.Environ = func() []string { return []string{"ANTHROPIC_API_KEY=sk-ant-realnode-not-a-key", "PATH=/usr/bin"} }
	runCtx, cancel := context.WithCancel(context.Background())
	ex, err := kubeexec.New(runCtx, e.c.RESTConfig(), opts)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	do := spool.DefaultOptions(e.spool)
	do.StateDir, do.Logger, do.RescanInterval = state, logger, 500*time.Millisecond
	d, err := spool.New(e.model, ex, do)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })
	run, _ := json.Marshal(map[string]any{"apiVersion": config.APIVersion, "kind": "Run", "company": e.slugA,
		"agent": "pinned", "prompt": "no-handler: sleep while the test probes"})
	if err := os.WriteFile(filepath.Join(e.spool, ".probe.tmp"), run, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(e.spool, ".probe.tmp"), filepath.Join(e.spool, "probe.json")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(4 * time.Minute)
	for {
		l, err := e.c.Client().CoreV1().Pods(e.nsA).List(ctx, metav1.ListOptions{LabelSelector: agentpod.LabelRunID})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range l.Items {
			if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
				return e.podProber("job", &p, false)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no Running Job pod in %s after 4 minutes", e.nsA)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// newTestNet creates the network namespace of a test's targets (package
// testnet), removed when the test ends; a failed removal fails the test.
func newTestNet(ctx context.Context, tb testing.TB) *testnet.Net {
	tb.Helper()
	tn, err := testnet.New(ctx, testnet.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := tn.Close(); err != nil {
			tb.Error(err)
		}
	})
	return tn
}
