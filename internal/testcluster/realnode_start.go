package testcluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// prepareRealNode runs before the control plane starts: it checks the host and
// takes the machine-wide lock, waiting up to LockTimeout for another real node to
// stop. The node is recorded in c.node at once, so that Close releases the lock
// whatever fails later.
func (c *Cluster) prepareRealNode(ctx context.Context) error {
	o := *c.opts.RealNode
	o.complete()
	if err := CheckBinaries(c.opts.BinDir); err != nil {
		return err
	}
	if err := checkNetBinaries(o.NetBinDir); err != nil {
		return err
	}
	if st, err := os.Stat(c.bin("kubelet")); err != nil || st.Mode()&0o111 == 0 {
		return fmt.Errorf("real node: kubelet not found in %s: %w", c.opts.BinDir, ErrBinariesMissing)
	}
	tools, err := checkRealNodeHost(o)
	if err != nil {
		return fmt.Errorf("real node: %w", err)
	}
	nt, err := findNetTools()
	if err != nil {
		return fmt.Errorf("real node: this machine lacks %w", err)
	}
	lctx, cancel := context.WithTimeout(ctx, o.LockTimeout)
	defer cancel()
	lock, err := lockMachine(lctx, o.LockPath, c.opts.Logf)
	if err != nil {
		return fmt.Errorf("real node: %w", err)
	}
	c.node = &RealNode{opts: o, tools: tools, lock: lock, net: &nodeNet{
		binDir: o.NetBinDir, name: o.Name, nodeIP: o.NodeIP, podSubnet: o.PodSubnet, tools: nt,
	}}
	return nil
}

// startRealNode starts the real node once the control plane runs: it sweeps what a
// crashed run left, starts the registry and pushes the pause image, sets up the
// node IP and cgroups, writes certificates and configuration, starts containerd
// and the kubelet and waits until the Node is Ready.
func (c *Cluster) startRealNode(ctx context.Context, begin time.Time) error {
	n := c.node
	o := n.opts
	logf := c.opts.Logf
	n.dir = c.path("realnode")
	paths := newNodePaths(n.dir)
	if len(paths.containerdSocket) > maxSocketPath {
		return fmt.Errorf("real node: containerd socket path %s is longer than %d bytes: use a shorter work dir",
			paths.containerdSocket, maxSocketPath)
	}

	sweepDirs := []string{n.dir}
	if prev := n.lock.previousDir(); prev != "" && prev != n.dir {
		logf("testcluster: real node: sweeping what an earlier run left (%s)", prev)
		sweepDirs = append(sweepDirs, prev)
	}
	if err := sweepNode(n.tools.ip, sweepDirs, logf); err != nil {
		return fmt.Errorf("real node: sweep: %w", err)
	}
	if err := sweepNodeNet(n.net.tools, o.NetBinDir, sweepDirs); err != nil {
		return fmt.Errorf("real node: sweep: %w", err)
	}
	if err := n.lock.record(n.dir); err != nil {
		return fmt.Errorf("real node: %w", err)
	}
	n.started = true
	if err := os.RemoveAll(n.dir); err != nil {
		return fmt.Errorf("real node: clean %s: %w", n.dir, err)
	}
	for _, d := range []string{paths.containerdRoot, paths.containerdState, paths.cniConfDir, paths.cniIPAMDir,
		paths.kubeletRoot, paths.podLogsDir, paths.volumePluginDir, paths.kubeletCertDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("real node: %w", err)
		}
	}
	if err := saveIPForward(n.dir); err != nil {
		return fmt.Errorf("real node: %w", err)
	}

	// Registry and pause image.
	reg, err := startRegistry(filepath.Join(n.dir, "registry"), c.path("logs", "registry.log"))
	if err != nil {
		return fmt.Errorf("real node: %w", err)
	}
	n.registry = reg
	pauseBin, err := buildPause(ctx, o.CacheDir)
	if err != nil {
		return fmt.Errorf("real node: %w", err)
	}
	img, err := pauseImage(pauseBin)
	if err != nil {
		return fmt.Errorf("real node: %w", err)
	}
	n.pauseImage = reg.Ref("pcsync/pause:" + pauseKey())
	if err := reg.Push(ctx, n.pauseImage, img); err != nil {
		return fmt.Errorf("real node: %w", err)
	}
	logf("testcluster: real node: registry %s, pause image pushed after %s", reg.Host(), time.Since(begin).Round(time.Millisecond))

	// The API server, for the pods: a proxy on the pod gateway address.
	gw, err := gatewayIP(o.PodSubnet)
	if err != nil {
		return fmt.Errorf("real node: %w", err)
	}
	if n.apiProxy, err = startAPIProxy(gw.String(), strings.TrimPrefix(c.apiserverURL, "https://")); err != nil {
		return fmt.Errorf("real node: %w", err)
	}
	n.apiHost = net.JoinHostPort(n.apiProxy.addr())

	// Host: node IP, cgroups.
	if err := setupNodeBridge(n.tools.ip, o.NodeIP); err != nil {
		return fmt.Errorf("real node: %w", err)
	}
	if err := routeServiceCIDR(n.tools.ip); err != nil {
		return fmt.Errorf("real node: %w", err)
	}
	if err := prepareCgroups(); err != nil {
		return fmt.Errorf("real node: %w", err)
	}

	// Identity: certificates, kubeconfig, RBAC.
	if err := issueNodeCerts(c.pki, paths, o.Name, o.NodeIP); err != nil {
		return fmt.Errorf("real node: %w", err)
	}
	user := "system:node:" + o.Name
	if err := writeKubeconfig(paths.kubeletKubeconfig, c.apiserverURL, user, c.pki.caCert, paths.clientCert, paths.clientKey); err != nil {
		return fmt.Errorf("real node: %w", err)
	}
	if err := c.bindNodeRole(ctx, user); err != nil {
		return fmt.Errorf("real node: %w", err)
	}

	// Configuration files.
	conflist, err := cniConflist(paths, o.PodSubnet)
	if err != nil {
		return fmt.Errorf("real node: %w", err)
	}
	pt, err := freePorts(2)
	if err != nil {
		return fmt.Errorf("real node: %w", err)
	}
	files := map[string]string{
		paths.containerdConfig: containerdConfig(paths, o.CNIBinDir, n.tools.runc, n.pauseImage),
		filepath.Join(paths.registryHostsDir, reg.Host(), "hosts.toml"): registryHostsFile(reg.Host()),
		filepath.Join(paths.cniConfDir, "10-"+cniNetwork+".conflist"):   conflist,
		paths.kubeletConfig: kubeletConfig(kubeletConfigParams{
			paths: paths, caFile: c.pki.caCert, nodeIP: o.NodeIP, port: pt[0], healthPort: pt[1], taint: !o.NoTaint,
		}),
		paths.resolvConf: "# pcsync real node: pods get the cluster DNS address only\n",
	}
	for path, data := range files {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("real node: %w", err)
		}
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			return fmt.Errorf("real node: %w", err)
		}
	}

	// containerd, then the kubelet.
	containerd, err := startComponent("containerd", n.tools.containerd,
		[]string{"--config", paths.containerdConfig, "--log-level", "info"}, c.path("logs"), nil)
	if err != nil {
		return fmt.Errorf("real node: %w", err)
	}
	n.containerd = containerd
	logf("testcluster: started containerd (pid %d)", containerd.cmd.Process.Pid)
	if err := waitSocket(ctx, containerd, paths.containerdSocket); err != nil {
		return fmt.Errorf("real node: %w", containerd.failure(err))
	}
	kubelet, err := startComponent("kubelet", c.bin("kubelet"), []string{
		"--config=" + paths.kubeletConfig,
		"--kubeconfig=" + paths.kubeletKubeconfig,
		"--root-dir=" + paths.kubeletRoot,
		"--cert-dir=" + paths.kubeletCertDir,
		"--hostname-override=" + o.Name,
		"--node-ip=" + o.NodeIP,
		"--node-labels=" + RealNodeTaintKey + "=true",
	}, c.path("logs"), nil)
	if err != nil {
		return fmt.Errorf("real node: %w", err)
	}
	n.kubelet = kubelet
	logf("testcluster: started kubelet (pid %d)", kubelet.cmd.Process.Pid)
	err = poll(ctx, kubelet, 100*time.Millisecond, func(ctx context.Context) (bool, string, error) {
		node, err := c.client.CoreV1().Nodes().Get(ctx, o.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		return nodeSchedulable(node)
	})
	if err != nil {
		if containerd.exited() {
			return fmt.Errorf("real node: %w", containerd.failure(err))
		}
		return fmt.Errorf("real node: %w", kubelet.failure(err))
	}
	logf("testcluster: real node %s Ready after %s", o.Name, time.Since(begin).Round(time.Millisecond))
	n.net.kubeconfig, n.net.logDir = c.kubeconfigPath, c.path("logs")
	if err := n.net.start(ctx, o.NetworkPolicy); err != nil {
		return fmt.Errorf("real node: %w", err)
	}
	logf("testcluster: real node: kube-proxy (and NetworkPolicy enforcer: %v) running after %s",
		o.NetworkPolicy, time.Since(begin).Round(time.Millisecond))
	return c.publishRealNode(ctx)
}

// bindNodeRole lets the kubelet's user act as a node: the cluster authorizes with
// RBAC alone (no Node authorizer), so the user needs the system:node ClusterRole.
func (c *Cluster) bindNodeRole(ctx context.Context, user string) error {
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "pcsync-testcluster:" + user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:node"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	_, err := c.client.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("ClusterRoleBinding %s: %w", crb.Name, err)
	}
	return nil
}

// waitSocket waits until a unix socket accepts connections.
func waitSocket(ctx context.Context, comp *component, path string) error {
	return poll(ctx, comp, 50*time.Millisecond, func(ctx context.Context) (bool, string, error) {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "unix", path)
		if err != nil {
			return false, err.Error(), nil
		}
		_ = conn.Close()
		return true, "", nil
	})
}

// publishRealNode adds the real node to the ConfigMap a process that attaches
// reads (Attach), so that it can pin pods there and push images.
func (c *Cluster) publishRealNode(ctx context.Context) error {
	cms := c.client.CoreV1().ConfigMaps(metav1.NamespaceSystem)
	cm, err := cms.Get(ctx, infoConfigMap, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("real node: publish: %w", err)
	}
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	n := c.node
	cm.Data["realNodeName"] = n.opts.Name
	cm.Data["realNodeIP"] = n.opts.NodeIP
	cm.Data["realNodeRegistry"] = n.registry.Host()
	cm.Data["realNodePauseImage"] = n.pauseImage
	cm.Data["realNodeAPIServer"] = n.apiHost
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("real node: publish: %w", err)
	}
	return nil
}

// attachedRealNode describes the real node of an attached cluster from its
// published ConfigMap, nil if it has none.
func attachedRealNode(data map[string]string) *RealNode {
	if data["realNodeName"] == "" {
		return nil
	}
	o := RealNodeOptions{Name: data["realNodeName"], NodeIP: data["realNodeIP"]}
	o.complete()
	return &RealNode{
		opts:       o,
		registry:   &Registry{host: data["realNodeRegistry"]},
		pauseImage: data["realNodePauseImage"],
		apiHost:    data["realNodeAPIServer"],
	}
}
