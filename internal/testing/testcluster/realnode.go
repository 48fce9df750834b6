package testcluster

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// RealNodeOptions configures the real node — kubelet, containerd, runc and a CNI
// bridge on this machine — that Start adds beside kwok's fake node when
// Options.RealNode is set. The zero value of every field means its default; use
// DefaultRealNodeOptions to see them. The node needs root, Linux, and Debian's
// containerd, runc and containernetworking-plugins packages.
type RealNodeOptions struct {
	// Name is the Node's name and its kubernetes.io/hostname label (default
	// "real-node-0").
	Name string
	// NodeIP is the node's InternalIP, held as a /32 by a bridge with no ports (the
	// kubelet refuses a loopback address). The API server reaches the kubelet there
	// for logs and exec. Default "10.200.0.1".
	NodeIP string
	// PodSubnet is the range the CNI bridge's host-local IPAM hands pod IPs from
	// (default "10.201.0.0/24").
	PodSubnet string
	// NoTaint leaves the node untainted. By default it carries the taint
	// RealNodeTaintKey=true:NoSchedule, so that pods go there only if they tolerate
	// it (RealNode.Pin), and the simulated pods of other tests stay on kwok's node.
	NoTaint bool
	// LockPath is the machine-wide lock held for the node's lifetime: one real node
	// per machine at a time (default "/run/pcsync-realnode.lock"). Its directory
	// also receives the state file a later start sweeps after a crash.
	LockPath string
	// LockTimeout bounds the wait for another process's real node to stop
	// (default 15 minutes).
	LockTimeout time.Duration
	// CNIBinDir holds the bridge, host-local and loopback CNI plugins (default
	// "/usr/lib/cni", where Debian's containernetworking-plugins puts them).
	CNIBinDir string
	// CacheDir keeps the compiled pause program between runs (default
	// ${XDG_CACHE_HOME:-$HOME/.cache}/pcsync/realnode).
	CacheDir string
	// NetworkPolicy makes the node enforce NetworkPolicies: kube-router's firewall
	// controller runs beside the kubelet (RealNode.StopNetworkPolicy and
	// StartNetworkPolicy switch it at run time). Without it, policies are accepted
	// and enforced by nothing, as on a cluster whose network plugin ignores them.
	NetworkPolicy bool
	// NetBinDir holds kube-proxy, which always runs (ClusterIP Services route from
	// the node's pods), and kube-router (default DefaultNetBinDir(), which
	// `make k8sbin` fills through hack/kuberouter/build.sh).
	NetBinDir string
	// AddonBinDir holds the cluster add-ons the node runs: local-path-provisioner,
	// its dynamic volumes, and CoreDNS, its cluster DNS (default
	// DefaultAddonBinDir(), which `make k8sbin` fills through hack/addons/build.sh).
	AddonBinDir string
	// Lazy starts the node (and takes the machine-wide lock) at the first
	// Cluster.RealNode call instead of with the control plane: a package
	// whose few tests need the node then runs its other tests while another
	// package holds it.
	Lazy bool
}

// KubeletVerbosityEnv, when set, is the real node's kubelet's --v (its log
// is in the cluster's logs directory; PCSYNC_TEST_KEEP_WORKDIR keeps it).
const KubeletVerbosityEnv = "PCSYNC_KUBELET_V"

// RealNodeTaintKey is the key of the NoSchedule taint the real node carries unless
// RealNodeOptions.NoTaint is set.
const RealNodeTaintKey = "pcsync.io/real-node"

// DefaultRealNodeOptions returns RealNodeOptions with every default filled in.
func DefaultRealNodeOptions() RealNodeOptions {
	cache := pcsyncCache()
	return RealNodeOptions{
		Name:        "real-node-0",
		NodeIP:      "10.200.0.1",
		PodSubnet:   "10.201.0.0/24",
		LockPath:    "/run/pcsync-realnode.lock",
		LockTimeout: 15 * time.Minute,
		CNIBinDir:   "/usr/lib/cni",
		CacheDir:    filepath.Join(cache, "realnode"),
		NetBinDir:   DefaultNetBinDir(),
		AddonBinDir: DefaultAddonBinDir(),
	}
}

func (o *RealNodeOptions) complete() {
	d := DefaultRealNodeOptions()
	o.Name = cmp.Or(o.Name, d.Name)
	o.NodeIP = cmp.Or(o.NodeIP, d.NodeIP)
	o.PodSubnet = cmp.Or(o.PodSubnet, d.PodSubnet)
	o.LockPath = cmp.Or(o.LockPath, d.LockPath)
	o.LockTimeout = cmp.Or(max(o.LockTimeout, 0), d.LockTimeout)
	o.CNIBinDir = cmp.Or(o.CNIBinDir, d.CNIBinDir)
	o.CacheDir = cmp.Or(o.CacheDir, d.CacheDir)
	o.NetBinDir = cmp.Or(o.NetBinDir, d.NetBinDir)
	o.AddonBinDir = cmp.Or(o.AddonBinDir, d.AddonBinDir)
}

// RealNode is the running real node of a Cluster (Cluster.RealNode), or the
// description of one that another process runs (a cluster reached with Attach).
type RealNode struct {
	opts       RealNodeOptions
	registry   *Registry
	pauseImage string
	apiHost    string // host:port where pods reach the API server (APIServerHost)
	volumeDir  string // where the provisioner makes volumes (VolumeDir)

	// Only for a node this process started:
	tools      hostTools
	lock       *machineLock
	dir        string // <work dir>/realnode
	started    bool   // the host was changed: Close must sweep
	containerd *component
	kubelet    *component
	apiProxy   *apiProxy
	net        *nodeNet // kube-proxy and kube-router
	// provisioner is local-path-provisioner (dynamic volumes).
	provisioner *component
}

// Name returns the Node's name, also its kubernetes.io/hostname label.
func (n *RealNode) Name() string { return n.opts.Name }

// NodeIP returns the node's InternalIP.
func (n *RealNode) NodeIP() string { return n.opts.NodeIP }

// Registry returns the registry on 127.0.0.1 the node pulls images from.
func (n *RealNode) Registry() *Registry { return n.registry }

// PauseImage returns the reference of the sandbox image in Registry(). Its one
// program, /pause, also serves as a test container's command: `/pause -print hi`
// prints and sleeps until SIGTERM; `/pause -cat -print done -exit 3` copies stdin
// to stdout, prints "done" and exits 3 (see internal/testing/testcluster/pause).
func (n *RealNode) PauseImage() string { return n.pauseImage }

// APIServerHost returns where the node's pods reach the API server: the pod
// bridge's gateway address (default 10.201.0.1) and a port on which the process that
// started the cluster forwards every connection to the API server on 127.0.0.1 (TLS
// passes through; the serving certificate holds the gateway address). The API
// server's Service IP does not serve pods (kube-proxy runs on the node, but the
// kubernetes Service's endpoint is the API server's own loopback address), so a pod
// that talks to the API server, e.g. pcsync's own Deployment, sets KUBERNETES_SERVICE_HOST and
// KUBERNETES_SERVICE_PORT to these: client-go's in-cluster config reads them with the
// projected service-account token and ca.crt. Empty for an attached cluster started
// before this existed.
func (n *RealNode) APIServerHost() (host, port string) {
	if n.apiHost == "" {
		return "", ""
	}
	host, port, _ = net.SplitHostPort(n.apiHost)
	return host, port
}

// MirrorRef returns where a test pushes the image that the node pulls as
// ref, when ref's registry is one the node's containerd mirrors from its
// own registry (ghcr.io, registry.k8s.io): ref with the node registry's host
// in place of its registry. ok is false for any other registry.
func (n *RealNode) MirrorRef(ref string) (mirror string, ok bool) {
	host, rest, found := strings.Cut(ref, "/")
	if !found || !slices.Contains(mirroredRegistries(), host) {
		return "", false
	}
	return n.registry.Ref(rest), true
}

// PodBridge returns the name of the CNI bridge the node's pods attach to: traffic
// from a pod to an address off the node comes into the host by it (see
// internal/testing/testnet, Net.Forward and Net.CheckRouteFrom). It exists once the node
// has run its first pod.
func (n *RealNode) PodBridge() string { return podBridge }

// PodSubnet returns the range the node's pod IPs come from.
func (n *RealNode) PodSubnet() string { return n.opts.PodSubnet }

// NodeSelector returns the node selector that picks this node.
func (n *RealNode) NodeSelector() map[string]string {
	return map[string]string{corev1.LabelHostname: n.opts.Name}
}

// Toleration returns the toleration of the node's taint (harmless if NoTaint).
func (n *RealNode) Toleration() corev1.Toleration {
	return corev1.Toleration{Key: RealNodeTaintKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
}

// Pin makes a pod spec run on this node: it sets the node selector and adds the
// toleration of its taint.
func (n *RealNode) Pin(spec *corev1.PodSpec) {
	if spec.NodeSelector == nil {
		spec.NodeSelector = map[string]string{}
	}
	for k, v := range n.NodeSelector() {
		spec.NodeSelector[k] = v
	}
	spec.Tolerations = append(spec.Tolerations, n.Toleration())
}

// RealNode returns the cluster's real node, nil if it has none (Options.RealNode
// unset, or an attached cluster started without one). A Lazy node is started by
// the first call; nil if it could not start (RealNodeError says why).
func (c *Cluster) RealNode() *RealNode {
	if c.opts.RealNode != nil && c.opts.RealNode.Lazy && c.started {
		c.lazyNode.Do(c.startLazyNode)
	}
	return c.node
}

// RealNodeError is why a Lazy real node did not start, or nil.
func (c *Cluster) RealNodeError() error { return c.lazyErr }

// startLazyNode takes the machine-wide lock (waiting up to LockTimeout) and
// starts the node; on failure nothing of it is left and c.node stays nil.
func (c *Cluster) startLazyNode() {
	if err := c.prepareRealNode(context.Background()); err != nil {
		c.lazyErr = fmt.Errorf("testcluster: %w", err)
		c.node = nil
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.StartTimeout)
	defer cancel()
	if err := c.startRealNode(ctx, time.Now()); err != nil {
		c.lazyErr = fmt.Errorf("testcluster: %w", err)
		if serr := c.stopRealNode(); serr != nil {
			c.opts.Logf("testcluster: stop the real node that failed to start: %v", serr)
		}
		c.node = nil
	}
}
