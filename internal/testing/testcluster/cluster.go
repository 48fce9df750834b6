package testcluster

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
)

// Options configures Start. The zero value of every field, and a negative count
// or duration, means its default; use
// DefaultOptions to see them.
type Options struct {
	// BinDir holds etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
	// kwok. Default: DefaultBinDir() ($PCSYNC_K8S_BIN_DIR or the build cache).
	BinDir string
	// WorkDir receives certificates, kubeconfigs, etcd data, component logs
	// (logs/<component>.log) and served container-log files. Default: a new
	// directory under os.TempDir(), removed by Close unless KeepWorkDir is set or
	// Start failed (its error names the log to read). A given WorkDir is never
	// removed.
	WorkDir string
	// KeepWorkDir keeps a generated WorkDir after Close (for post-mortems).
	KeepWorkDir bool
	// NodeName is the name of the one fake node (default "kwok-node-0").
	NodeName string
	// NodeCPU, NodeMemory and NodePods are the node's capacity and allocatable
	// resources (defaults "32", "256Gi", 110).
	NodeCPU    string
	NodeMemory string
	NodePods   int
	// StartTimeout bounds Start from the first process to the node being Ready
	// (default 2 minutes).
	StartTimeout time.Duration
	// StopGrace is how long Close waits after SIGTERM before SIGKILL (default 15s).
	StopGrace time.Duration
	// Logf receives progress messages; nil discards them.
	Logf func(format string, args ...any)
	// ExtraAPIServerArgs are appended to kube-apiserver's command line.
	ExtraAPIServerArgs []string
	// RealNode, if set, adds a real node — kubelet, containerd, runc, a CNI bridge
	// and a local image registry — beside the fake one, once the control plane runs
	// (see "Real node" in the package documentation). Start then needs root and
	// the containerd, runc and containernetworking-plugins packages, and waits for
	// any other real node on the machine to stop. nil: no real node.
	RealNode *RealNodeOptions
}

// DefaultOptions returns Options with every default filled in.
func DefaultOptions() Options {
	return Options{
		BinDir:       DefaultBinDir(),
		NodeName:     "kwok-node-0",
		NodeCPU:      "32",
		NodeMemory:   "256Gi",
		NodePods:     110,
		StartTimeout: 2 * time.Minute,
		StopGrace:    15 * time.Second,
	}
}

func (o *Options) complete() {
	d := DefaultOptions()
	o.BinDir = cmp.Or(o.BinDir, d.BinDir)
	o.NodeName = cmp.Or(o.NodeName, d.NodeName)
	o.NodeCPU = cmp.Or(o.NodeCPU, d.NodeCPU)
	o.NodeMemory = cmp.Or(o.NodeMemory, d.NodeMemory)
	o.NodePods = cmp.Or(max(o.NodePods, 0), d.NodePods)
	o.StartTimeout = cmp.Or(max(o.StartTimeout, 0), d.StartTimeout)
	o.StopGrace = cmp.Or(max(o.StopGrace, 0), d.StopGrace)
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
}

// Cluster is a running control plane (or one attached to through a kubeconfig).
type Cluster struct {
	opts           Options
	restConfig     *rest.Config
	kubeconfigPath string
	client         kubernetes.Interface
	dyn            dynamic.Interface
	info           clusterInfo
	// node is the real node, nil if there is none.
	node *RealNode
	// lazyNode starts a Lazy real node once the control plane runs
	// (started); lazyErr is why it did not start.
	lazyNode sync.Once
	lazyErr  error
	started  bool

	// Only for a cluster this process started:
	workDir      string
	removeWork   bool
	apiserverURL string
	pki          *pki
	// apiArgs is kube-apiserver's command line, for StartAPIServer.
	apiArgs []string
	// compsMu guards comps, which StopAPIServer and StartAPIServer change
	// while tests read PIDs.
	compsMu sync.Mutex
	comps   []*component

	closeOnce sync.Once
	closeErr  error
}

// clusterInfo is what a started cluster publishes in the ConfigMap
// kube-system/pcsync-testcluster, so that a test attached through a kubeconfig can
// find the files of a cluster another process runs.
type clusterInfo struct {
	WorkDir       string
	AuditLogPath  string
	ServedLogsDir string
	NodeName      string
	KwokAddress   string // host:port of kwok's kubelet API (container logs)
}

const infoConfigMap = "pcsync-testcluster"

func (i clusterInfo) data() map[string]string {
	return map[string]string{
		"workDir":       i.WorkDir,
		"auditLogPath":  i.AuditLogPath,
		"servedLogsDir": i.ServedLogsDir,
		"nodeName":      i.NodeName,
		"kwokAddress":   i.KwokAddress,
		"version":       VersionKey(),
	}
}

// ports are the loopback ports of one cluster.
type ports struct {
	etcdClient, etcdPeer, apiserver, kcm, scheduler, kwokServer int
}

// freePorts reserves n distinct free loopback ports (all held open until every one is
// chosen, so none is handed out twice).
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	out := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// Start builds a fresh control plane: etcd, kube-apiserver (RBAC, Pod Security
// admission, audit log of mutating requests), kube-controller-manager,
// kube-scheduler and kwok playing one node, all on 127.0.0.1. It returns once the
// node is Ready and schedulable and the default ServiceAccount exists. On failure
// everything started is stopped and the error carries the tail of the failing
// component's log. ctx bounds the start only; Close stops the cluster.
func Start(ctx context.Context, opts Options) (c *Cluster, err error) {
	opts.complete()
	begin := time.Now()
	if err := CheckBinaries(opts.BinDir); err != nil {
		return nil, err
	}
	c = &Cluster{opts: opts}
	if opts.RealNode != nil && !opts.RealNode.Lazy {
		// Before the timeout starts: waiting for another real node is
		// bounded by LockTimeout.
		if err := c.prepareRealNode(ctx); err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("testcluster: %w", err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	if opts.WorkDir == "" {
		dir, err := os.MkdirTemp("", "pcsync-testcluster-")
		if err != nil {
			return nil, fmt.Errorf("testcluster: work dir: %w", err)
		}
		c.workDir, c.removeWork = dir, !opts.KeepWorkDir
	} else {
		if err := os.MkdirAll(opts.WorkDir, 0o755); err != nil {
			return nil, fmt.Errorf("testcluster: work dir: %w", err)
		}
		c.workDir = opts.WorkDir
	}
	defer func() {
		if err != nil {
			c.removeWork = false // keep the logs the error points to
			_ = c.Close()
			c = nil
		}
	}()
	// Free ports are picked before the processes bind them; if another process took
	// one meanwhile, start over with new ports.
	for attempt := 1; ; attempt++ {
		err = c.start(ctx, begin)
		if err == nil && c.node != nil {
			if err = c.startRealNode(ctx, begin); err != nil {
				return c, fmt.Errorf("testcluster: %w", err)
			}
		}
		if err == nil {
			c.started = true
			return c, nil
		}
		if attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
			return c, fmt.Errorf("testcluster: start: %w", err)
		}
		opts.Logf("testcluster: a port was taken, starting over: %v", err)
		_ = c.stopComponents()
		c.compsMu.Lock()
		c.comps = nil
		c.compsMu.Unlock()
	}
}

func (c *Cluster) path(elem ...string) string {
	return filepath.Join(append([]string{c.workDir}, elem...)...)
}

func (c *Cluster) bin(name string) string { return filepath.Join(c.opts.BinDir, name) }

func (c *Cluster) start(ctx context.Context, begin time.Time) error {
	pt, err := c.prepare()
	if err != nil {
		return err
	}
	etcdURL, err := c.startEtcd(ctx, pt, begin)
	if err != nil {
		return err
	}
	apiserver, err := c.startAPIServer(ctx, pt, etcdURL, begin)
	if err != nil {
		return err
	}
	// Controller manager and scheduler start while the rest is set up.
	kcm, sched, err := c.startControllers(pt)
	if err != nil {
		return err
	}
	if err := c.simObjects(ctx); err != nil {
		return apiserver.failure(err)
	}
	kwok, err := c.startKwok(pt)
	if err != nil {
		return err
	}

	// Readiness of the rest, each with the component to blame.
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: insecureLoopbackTLS()}, Timeout: 5 * time.Second}
	if err := waitHTTP(ctx, kcm, fmt.Sprintf("https://127.0.0.1:%d/healthz", pt.kcm), insecure); err != nil {
		return kcm.failure(err)
	}
	if err := waitHTTP(ctx, sched, fmt.Sprintf("https://127.0.0.1:%d/healthz", pt.scheduler), insecure); err != nil {
		return sched.failure(err)
	}
	if err := c.waitNodeReady(ctx, kwok); err != nil {
		return kwok.failure(err)
	}
	c.opts.Logf("testcluster: node %s Ready after %s", c.opts.NodeName, time.Since(begin).Round(time.Millisecond))
	if err := c.waitServiceAccount(ctx, "default", kcm); err != nil {
		return kcm.failure(err)
	}
	if err := c.publishInfo(ctx); err != nil {
		return apiserver.failure(err)
	}
	c.opts.Logf("testcluster: cluster ready after %s (work dir %s)", time.Since(begin).Round(time.Millisecond), c.workDir)
	return nil
}

// prepare readies the work directory before any process starts: old state
// removed, a fresh PKI, free ports, the cluster's info, its kubeconfigs and
// the admin clients.
func (c *Cluster) prepare() (ports, error) {
	// A reused work dir keeps its logs (appended) but never old state.
	for _, d := range []string{"etcd", "pki", "kwok", "apiserver-certs", "kcm-certs", "scheduler-certs"} {
		if err := os.RemoveAll(c.path(d)); err != nil {
			return ports{}, fmt.Errorf("clean %s: %w", d, err)
		}
	}
	var apiserverIPs []net.IP
	if c.opts.RealNode != nil {
		o := *c.opts.RealNode
		o.complete()
		gw, err := gatewayIP(o.PodSubnet)
		if err != nil {
			return ports{}, fmt.Errorf("real node: %w", err)
		}
		apiserverIPs = append(apiserverIPs, gw)
	}
	p, err := newPKI(c.path("pki"), apiserverIPs...)
	if err != nil {
		return ports{}, err
	}
	c.pki = p
	pl, err := freePorts(6)
	if err != nil {
		return ports{}, err
	}
	pt := ports{pl[0], pl[1], pl[2], pl[3], pl[4], pl[5]}
	c.apiserverURL = fmt.Sprintf("https://127.0.0.1:%d", pt.apiserver)
	c.info = clusterInfo{
		WorkDir:       c.workDir,
		AuditLogPath:  c.path("logs", "audit.log"),
		ServedLogsDir: c.path("served-logs"),
		NodeName:      c.opts.NodeName,
		KwokAddress:   "127.0.0.1:" + strconv.Itoa(pt.kwokServer),
	}
	if err := os.MkdirAll(c.info.ServedLogsDir, 0o755); err != nil {
		return ports{}, fmt.Errorf("served logs dir: %w", err)
	}
	return pt, c.adminAccess()
}

// adminAccess writes the kubeconfigs (admin: handed out, also used by kwok;
// controller-manager; scheduler) and makes the admin clients.
func (c *Cluster) adminAccess() error {
	p := c.pki
	c.kubeconfigPath = c.path("kubeconfig")
	for _, kc := range []struct{ path, user, cert, key string }{
		{c.kubeconfigPath, "admin", p.adminCert, p.adminKey},
		{c.path("pki", "kube-controller-manager.kubeconfig"), "system:kube-controller-manager", p.kcmCert, p.kcmKey},
		{c.path("pki", "kube-scheduler.kubeconfig"), "system:kube-scheduler", p.schedCert, p.schedKey},
	} {
		if err := writeKubeconfig(kc.path, c.apiserverURL, kc.user, p.caCert, kc.cert, kc.key); err != nil {
			return err
		}
	}
	restCfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfigPath)
	if err != nil {
		return fmt.Errorf("admin kubeconfig: %w", err)
	}
	restCfg.QPS, restCfg.Burst = 200, 400
	c.restConfig = restCfg
	if c.client, err = kubernetes.NewForConfig(restCfg); err != nil {
		return fmt.Errorf("admin client: %w", err)
	}
	if c.dyn, err = dynamic.NewForConfig(restCfg); err != nil {
		return fmt.Errorf("admin dynamic client: %w", err)
	}
	return nil
}

// startEtcd starts etcd and waits for its health; it returns its client URL.
func (c *Cluster) startEtcd(ctx context.Context, pt ports, begin time.Time) (string, error) {
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", pt.etcdClient)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", pt.etcdPeer)
	etcd, err := c.run("etcd", []string{
		"--name=testcluster",
		"--data-dir=" + c.path("etcd"),
		"--listen-client-urls=" + etcdURL,
		"--advertise-client-urls=" + etcdURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=testcluster=" + peerURL,
		"--initial-cluster-state=new",
		"--unsafe-no-fsync",
		"--quota-backend-bytes=2147483648",
		"--log-level=warn",
	})
	if err != nil {
		return "", err
	}
	if err := waitHTTP(ctx, etcd, etcdURL+"/health", nil); err != nil {
		return "", etcd.failure(err)
	}
	c.opts.Logf("testcluster: etcd ready after %s", time.Since(begin).Round(time.Millisecond))
	return etcdURL, nil
}

// startAPIServer starts kube-apiserver on etcdURL and waits until it is
// ready.
func (c *Cluster) startAPIServer(ctx context.Context, pt ports, etcdURL string, begin time.Time) (*component, error) {
	auditPolicy := c.path("pki", "audit-policy.yaml")
	if err := os.WriteFile(auditPolicy, []byte(auditPolicyYAML), 0o600); err != nil {
		return nil, fmt.Errorf("audit policy: %w", err)
	}
	c.apiArgs = append(c.apiServerArgs(pt, etcdURL, auditPolicy), c.opts.ExtraAPIServerArgs...)
	apiserver, err := c.run("kube-apiserver", c.apiArgs)
	if err != nil {
		return nil, err
	}
	if err := c.waitReadyz(ctx, apiserver); err != nil {
		return nil, apiserver.failure(err)
	}
	c.opts.Logf("testcluster: kube-apiserver ready after %s", time.Since(begin).Round(time.Millisecond))
	return apiserver, nil
}

// apiServerArgs is kube-apiserver's command line but for ExtraAPIServerArgs.
func (c *Cluster) apiServerArgs(pt ports, etcdURL, auditPolicy string) []string {
	p := c.pki
	return []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(pt.apiserver),
		"--cert-dir=" + c.path("apiserver-certs"),
		"--tls-cert-file=" + p.apiserverCert,
		"--tls-private-key-file=" + p.apiserverKey,
		"--client-ca-file=" + p.caCert,
		"--service-cluster-ip-range=" + ServiceCIDR,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + p.saPub,
		"--service-account-signing-key-file=" + p.saKey,
		"--authorization-mode=RBAC",
		"--kubelet-client-certificate=" + p.kubeletClientCert,
		"--kubelet-client-key=" + p.kubeletClientKey,
		"--kubelet-certificate-authority=" + p.caCert,
		"--kubelet-preferred-address-types=InternalIP",
		"--endpoint-reconciler-type=none",
		"--allow-privileged=true",
		"--enable-priority-and-fairness=false",
		"--feature-gates=MutatingAdmissionPolicy=true",
		"--runtime-config=admissionregistration.k8s.io/v1beta1=true",
		"--audit-policy-file=" + auditPolicy,
		"--audit-log-path=" + c.info.AuditLogPath,
		"--audit-log-format=json",
		"--audit-log-mode=blocking",
		"--audit-log-maxsize=200",
		"--profiling=false",
		"--v=1",
	}
}

// startControllers starts kube-controller-manager and kube-scheduler,
// without waiting for them.
func (c *Cluster) startControllers(pt ports) (kcm, sched *component, err error) {
	kcm, err = c.run("kube-controller-manager", []string{
		"--kubeconfig=" + c.path("pki", "kube-controller-manager.kubeconfig"),
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(pt.kcm),
		"--cert-dir=" + c.path("kcm-certs"),
		"--leader-elect=false",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + c.pki.saKey,
		"--root-ca-file=" + c.pki.caCert,
		"--controllers=" + strings.Join(controllers, ","),
		"--v=1",
	})
	if err != nil {
		return nil, nil, err
	}
	sched, err = c.run("kube-scheduler", []string{
		"--kubeconfig=" + c.path("pki", "kube-scheduler.kubeconfig"),
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(pt.scheduler),
		"--cert-dir=" + c.path("scheduler-certs"),
		"--leader-elect=false",
		"--v=1",
	})
	if err != nil {
		return nil, nil, err
	}
	return kcm, sched, nil
}

// simObjects creates the objects the simulation needs: kwok's CRDs, the
// unschedulable policy, the node.
func (c *Cluster) simObjects(ctx context.Context) error {
	if err := c.applyManifests(ctx, kwokCRDs+"\n---\n"+simPolicy); err != nil {
		return err
	}
	if err := c.waitCRDs(ctx, "logs.kwok.x-k8s.io", "clusterlogs.kwok.x-k8s.io", "execs.kwok.x-k8s.io", "clusterexecs.kwok.x-k8s.io"); err != nil {
		return err
	}
	return c.createNode(ctx)
}

// startKwok writes kwok's config and starts it, managing the fake node.
func (c *Cluster) startKwok(pt ports) (*component, error) {
	kwokConfig := c.path("kwok", "kwok.yaml")
	if err := os.MkdirAll(filepath.Dir(kwokConfig), 0o755); err != nil {
		return nil, fmt.Errorf("kwok config: %w", err)
	}
	if err := os.WriteFile(kwokConfig, []byte(kwokStages()), 0o600); err != nil {
		return nil, fmt.Errorf("kwok config: %w", err)
	}
	return c.run("kwok", []string{
		"--kubeconfig=" + c.kubeconfigPath,
		"--config=" + kwokConfig,
		"--manage-single-node=" + c.opts.NodeName,
		"--node-ip=127.0.0.1",
		"--node-name=" + c.opts.NodeName,
		// kwok serves the kubelet API (container logs) and its own health/metrics on
		// the server address; the node advertises that port to the API server.
		"--node-port=" + strconv.Itoa(pt.kwokServer),
		"--server-address=127.0.0.1:" + strconv.Itoa(pt.kwokServer),
		"--tls-cert-file=" + c.pki.kwokServingCert,
		"--tls-private-key-file=" + c.pki.kwokServingKey,
		"--cidr=10.244.0.0/16",
		"--enable-crds=Logs,ClusterLogs,Exec,ClusterExec",
		"--node-lease-duration-seconds=40",
	})
}

// controllers are the kube-controller-manager controllers the tests need; fewer
// controllers start faster.
var controllers = []string{
	"serviceaccount-token-controller",
	"serviceaccount-controller",
	"root-ca-certificate-publisher-controller",
	"clusterrole-aggregation-controller",
	"job-controller",
	"cronjob-controller",
	"garbage-collector-controller",
	"namespace-controller",
	"ttl-after-finished-controller",
	"resourcequota-controller",
	"pod-garbage-collector-controller",
	"replicaset-controller",
	"deployment-controller",
	// A Service's EndpointSlices, which kube-proxy on the real node programs
	// ClusterIPs from (egress mode proxy's agents reach their proxy so).
	"endpointslice-controller",
	"node-lifecycle-controller",
	"taint-eviction-controller",
	// A claim binds to the PersistentVolume a test provides (deploy/base's
	// spool), and its pvc-protection finalizer goes with its last pod.
	"persistentvolume-binder-controller",
	"persistentvolumeclaim-protection-controller",
	"persistentvolume-protection-controller",
}

// auditPolicyYAML records every request that may change state, at Metadata level
// (who, what, which object, response code, the request URI), and every pod exec,
// attach and port-forward, whatever its verb (a WebSocket exec is a GET); other
// reads are not recorded.
const auditPolicyYAML = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  resources:
  - group: ""
    resources: ["pods/exec", "pods/attach", "pods/portforward"]
- level: None
  verbs: ["get", "list", "watch"]
- level: None
  nonResourceURLs: ["/*"]
- level: Metadata
`

func (c *Cluster) run(name string, args []string) (*component, error) {
	comp, err := startComponent(name, c.bin(name), args, c.path("logs"), nil)
	if err != nil {
		return nil, err
	}
	c.compsMu.Lock()
	c.comps = append(c.comps, comp)
	c.compsMu.Unlock()
	c.opts.Logf("testcluster: started %s (pid %d)", name, comp.cmd.Process.Pid)
	return comp, nil
}

// poll calls f every interval until it returns true, an error, the component exits or
// ctx ends; the last "not yet" reason is part of the timeout error.
func poll(ctx context.Context, comp *component, interval time.Duration, f func(context.Context) (bool, string, error)) error {
	last := "not checked yet"
	for {
		ok, why, err := f(ctx)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if why != "" {
			last = why
		}
		var exited <-chan struct{}
		if comp != nil {
			exited = comp.done
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready (%s): %w", last, ctx.Err())
		case <-exited:
			return fmt.Errorf("process exited before it was ready (%s)", last)
		case <-time.After(interval):
		}
	}
}

func waitHTTP(ctx context.Context, comp *component, url string, client *http.Client) error {
	if client == nil {
		client = &http.Client{Timeout: 5 * time.Second}
	}
	return poll(ctx, comp, 100*time.Millisecond, func(ctx context.Context) (bool, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, "", fmt.Errorf("request %s: %w", url, err)
		}
		resp, err := client.Do(req)
		if err != nil {
			return false, err.Error(), nil
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false, fmt.Sprintf("%s answered %s", url, resp.Status), nil
		}
		return true, "", nil
	})
}

func (c *Cluster) waitReadyz(ctx context.Context, comp *component) error {
	rc := c.client.Discovery().RESTClient()
	return poll(ctx, comp, 100*time.Millisecond, func(ctx context.Context) (bool, string, error) {
		body, err := rc.Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return false, fmt.Sprintf("/readyz: %v %s", err, strings.TrimSpace(string(body))), nil
		}
		return true, "", nil
	})
}

func (c *Cluster) waitCRDs(ctx context.Context, names ...string) error {
	gvr := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	for _, name := range names {
		err := poll(ctx, nil, 100*time.Millisecond, func(ctx context.Context) (bool, string, error) {
			u, err := c.dyn.Resource(gvr).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			for _, cond := range conds {
				m, _ := cond.(map[string]any)
				if m["type"] == "Established" && m["status"] == "True" {
					return true, "", nil
				}
			}
			return false, "CRD " + name + " not Established", nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s: %w", name, err)
		}
	}
	return nil
}

// applyManifests server-side applies a multi-document YAML stream with the admin
// client (field manager pcsync-testcluster).
func (c *Cluster) applyManifests(ctx context.Context, stream string) error {
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(stream), 4096)
	for {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("decode manifest: %w", err)
		}
		if len(u.Object) == 0 {
			continue
		}
		gvk := u.GroupVersionKind()
		resource, namespaced, err := c.resourceFor(gvk)
		if err != nil {
			return err
		}
		data, err := u.MarshalJSON()
		if err != nil {
			return fmt.Errorf("encode %s %s: %w", gvk.Kind, u.GetName(), err)
		}
		var ri dynamic.ResourceInterface = c.dyn.Resource(resource)
		if namespaced {
			ri = c.dyn.Resource(resource).Namespace(u.GetNamespace())
		}
		// A just-started apiserver may not serve a new group for a moment.
		err = poll(ctx, nil, 200*time.Millisecond, func(ctx context.Context) (bool, string, error) {
			_, err := ri.Patch(ctx, u.GetName(), "application/apply-patch+yaml", data,
				metav1.PatchOptions{FieldManager: "pcsync-testcluster", Force: ptr.To(true)})
			if err != nil {
				if apierrors.IsNotFound(err) || apierrors.IsServiceUnavailable(err) {
					return false, err.Error(), nil
				}
				return false, "", err
			}
			return true, "", nil
		})
		if err != nil {
			return fmt.Errorf("apply %s %s: %w", gvk.Kind, u.GetName(), err)
		}
	}
}

// resourceFor maps the few kinds this package applies to their resources.
func (c *Cluster) resourceFor(gvk schema.GroupVersionKind) (schema.GroupVersionResource, bool, error) {
	switch gvk.Kind {
	case "CustomResourceDefinition":
		return gvk.GroupVersion().WithResource("customresourcedefinitions"), false, nil
	case "MutatingAdmissionPolicy":
		return gvk.GroupVersion().WithResource("mutatingadmissionpolicies"), false, nil
	case "MutatingAdmissionPolicyBinding":
		return gvk.GroupVersion().WithResource("mutatingadmissionpolicybindings"), false, nil
	}
	return schema.GroupVersionResource{}, false, fmt.Errorf("no resource known for %s", gvk)
}

func (c *Cluster) createNode(ctx context.Context) error {
	qty := func(s string) (resource.Quantity, error) {
		q, err := resource.ParseQuantity(s)
		if err != nil {
			return q, fmt.Errorf("node resources: %q: %w", s, err)
		}
		return q, nil
	}
	cpu, err := qty(c.opts.NodeCPU)
	if err != nil {
		return err
	}
	mem, err := qty(c.opts.NodeMemory)
	if err != nil {
		return err
	}
	res := corev1.ResourceList{
		corev1.ResourceCPU:              cpu,
		corev1.ResourceMemory:           mem,
		corev1.ResourcePods:             *resource.NewQuantity(int64(c.opts.NodePods), resource.DecimalSI),
		corev1.ResourceEphemeralStorage: resource.MustParse("1Ti"),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: c.opts.NodeName,
			Labels: map[string]string{
				"kubernetes.io/hostname": c.opts.NodeName,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
				"type":                   "kwok",
			},
			Annotations: map[string]string{
				"kwok.x-k8s.io/node":           "fake",
				"node.alpha.kubernetes.io/ttl": "0",
			},
		},
		Status: corev1.NodeStatus{
			Capacity:    res,
			Allocatable: res,
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: "127.0.0.1"},
				{Type: corev1.NodeHostName, Address: c.opts.NodeName},
			},
		},
	}
	created, err := c.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create node %s: %w", c.opts.NodeName, err)
	}
	if created.Status.Allocatable.Cpu().IsZero() {
		created.Status = node.Status
		if _, err := c.client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("node %s status: %w", c.opts.NodeName, err)
		}
	}
	return nil
}

// waitNodeReady waits until the node is Ready and carries no not-ready/unreachable
// taint, i.e. the scheduler will place pods on it.
func (c *Cluster) waitNodeReady(ctx context.Context, comp *component) error {
	return poll(ctx, comp, 100*time.Millisecond, func(ctx context.Context) (bool, string, error) {
		n, err := c.client.CoreV1().Nodes().Get(ctx, c.opts.NodeName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		return nodeSchedulable(n)
	})
}

func nodeSchedulable(n *corev1.Node) (bool, string, error) {
	ready := false
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
			ready = true
		}
	}
	if !ready {
		return false, "node " + n.Name + " not Ready", nil
	}
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
			return false, "node " + n.Name + " still tainted " + t.Key, nil
		}
	}
	if n.Spec.Unschedulable {
		return false, "node " + n.Name + " cordoned", nil
	}
	return true, "", nil
}

func (c *Cluster) waitServiceAccount(ctx context.Context, namespace string, comp *component) error {
	return poll(ctx, comp, 100*time.Millisecond, func(ctx context.Context) (bool, string, error) {
		_, err := c.client.CoreV1().ServiceAccounts(namespace).Get(ctx, "default", metav1.GetOptions{})
		if err != nil {
			return false, "ServiceAccount " + namespace + "/default: " + err.Error(), nil
		}
		return true, "", nil
	})
}

func (c *Cluster) publishInfo(ctx context.Context) error {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: infoConfigMap, Namespace: metav1.NamespaceSystem},
		Data:       c.info.data(),
	}
	_, err := c.client.CoreV1().ConfigMaps(metav1.NamespaceSystem).Create(ctx, cm, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("publish %s/%s: %w", metav1.NamespaceSystem, infoConfigMap, err)
	}
	return nil
}

func writeKubeconfig(path, server, user, caFile, certFile, keyFile string) error {
	read := func(f string) ([]byte, error) {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
		}
		return b, nil
	}
	ca, err := read(caFile)
	if err != nil {
		return err
	}
	cert, err := read(certFile)
	if err != nil {
		return err
	}
	key, err := read(keyFile)
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["pcsync-testcluster"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	cfg.Contexts["pcsync-testcluster"] = &clientcmdapi.Context{Cluster: "pcsync-testcluster", AuthInfo: user}
	cfg.CurrentContext = "pcsync-testcluster"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	return nil
}

// Attach returns a Cluster for an already running control plane, through the
// kubeconfig at path (e.g. the dev cluster's .dev/kubeconfig). Close does not stop it.
// If the cluster was started by this package (even in another process), the
// helpers that need its files (ServeLogs, AuditEvents) work as well.
func Attach(ctx context.Context, kubeconfigPath string) (*Cluster, error) {
	restCfg, err := clientcmd.BuildConfigFromFlags("", kubeconfigPath)
	if err != nil {
		return nil, fmt.Errorf("testcluster: attach %s: %w", kubeconfigPath, err)
	}
	restCfg.QPS, restCfg.Burst = 200, 400
	c := &Cluster{restConfig: restCfg, kubeconfigPath: kubeconfigPath}
	c.opts.complete()
	if c.client, err = kubernetes.NewForConfig(restCfg); err != nil {
		return nil, fmt.Errorf("testcluster: attach: %w", err)
	}
	if c.dyn, err = dynamic.NewForConfig(restCfg); err != nil {
		return nil, fmt.Errorf("testcluster: attach: %w", err)
	}
	cm, err := c.client.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, infoConfigMap, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("testcluster: attach %s: cluster not started by testcluster (ConfigMap %s/%s): %w",
			kubeconfigPath, metav1.NamespaceSystem, infoConfigMap, err)
	}
	c.info = clusterInfo{
		WorkDir:       cm.Data["workDir"],
		AuditLogPath:  cm.Data["auditLogPath"],
		ServedLogsDir: cm.Data["servedLogsDir"],
		NodeName:      cm.Data["nodeName"],
		KwokAddress:   cm.Data["kwokAddress"],
	}
	c.opts.NodeName = c.info.NodeName
	c.node = attachedRealNode(cm.Data)
	n, err := c.client.CoreV1().Nodes().Get(ctx, c.info.NodeName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("testcluster: attach: node %s: %w", c.info.NodeName, err)
	}
	if ok, why, _ := nodeSchedulable(n); !ok {
		return nil, fmt.Errorf("testcluster: attach: %s", why)
	}
	return c, nil
}

// RESTConfig returns a copy of the admin (system:masters) client configuration.
func (c *Cluster) RESTConfig() *rest.Config { return rest.CopyConfig(c.restConfig) }

// KubeconfigPath returns the path of the admin kubeconfig (certificates embedded).
func (c *Cluster) KubeconfigPath() string { return c.kubeconfigPath }

// Client returns a clientset with admin rights.
func (c *Cluster) Client() kubernetes.Interface { return c.client }

// Dynamic returns a dynamic client with admin rights.
func (c *Cluster) Dynamic() dynamic.Interface { return c.dyn }

// NodeName returns the name of the fake node.
func (c *Cluster) NodeName() string { return c.info.NodeName }

// WorkDir returns the cluster's work directory ("" if unknown).
func (c *Cluster) WorkDir() string { return c.info.WorkDir }

// ComponentLogPath returns the log file of a component this process started
// ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok";
// with a real node also "containerd" and "kubelet"), or "" for an attached cluster.
func (c *Cluster) ComponentLogPath(name string) string {
	c.compsMu.Lock()
	defer c.compsMu.Unlock()
	for _, comp := range c.componentsLocked() {
		if comp.name == name {
			return comp.logPath
		}
	}
	return ""
}

// PIDs returns the process ids of the components this process started, by name.
func (c *Cluster) PIDs() map[string]int {
	c.compsMu.Lock()
	defer c.compsMu.Unlock()
	out := map[string]int{}
	for _, comp := range c.componentsLocked() {
		if comp.cmd.Process != nil {
			out[comp.name] = comp.cmd.Process.Pid
		}
	}
	return out
}

// Close stops every process this Cluster started — kwok, the scheduler and the
// controller manager first, then the API server, then etcd — each with SIGTERM and,
// after Options.StopGrace, SIGKILL; then it removes a generated work directory. For
// an attached cluster it does nothing. It is safe to call more than once.
func (c *Cluster) Close() error {
	if c == nil {
		return nil
	}
	c.closeOnce.Do(func() {
		// The real node first: its pods are deleted through the API.
		errs := []error{c.stopRealNode(), c.stopComponents()}
		if c.removeWork {
			if err := os.RemoveAll(c.workDir); err != nil {
				errs = append(errs, fmt.Errorf("remove work dir: %w", err))
			}
		}
		if err := errors.Join(errs...); err != nil {
			c.closeErr = fmt.Errorf("testcluster: close: %w", err)
		}
	})
	return c.closeErr
}

// componentsLocked returns the control plane's components and the real node's
// (kubelet, containerd, kube-proxy, kube-router while it runs). c.compsMu must be held.
func (c *Cluster) componentsLocked() []*component {
	comps := append([]*component(nil), c.comps...)
	if c.node != nil {
		for _, comp := range []*component{c.node.containerd, c.node.kubelet} {
			if comp != nil {
				comps = append(comps, comp)
			}
		}
		if c.node.net != nil {
			comps = append(comps, c.node.net.components()...)
		}
	}
	return comps
}

// stopComponents stops kwok, the scheduler and the controller manager in parallel,
// then the API server, then etcd.
func (c *Cluster) stopComponents() error {
	grace := c.opts.StopGrace
	var clients, servers []*component
	c.compsMu.Lock()
	comps := append([]*component(nil), c.comps...)
	c.compsMu.Unlock()
	for _, comp := range comps {
		switch comp.name {
		case "etcd", "kube-apiserver":
			servers = append(servers, comp)
		default:
			clients = append(clients, comp)
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(clients))
	for i, comp := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = comp.stop(grace)
		}()
	}
	wg.Wait()
	errs = append(errs, stopAll(servers, grace))
	return errors.Join(errs...)
}

// insecureLoopbackTLS is for the health checks of kube-controller-manager and
// kube-scheduler only: they serve self-signed certificates they generate at start, on
// 127.0.0.1, and only their /healthz answer is read.
func insecureLoopbackTLS() *tls.Config {
	return &tls.Config{InsecureSkipVerify: true} //nolint:gosec // loopback health check of our own child
}
