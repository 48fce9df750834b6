package testcluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
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
	if err := checkAddonBinaries(o.AddonBinDir); err != nil {
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
// and the kubelet and waits until the Node is Ready, then starts the node's
// network programs. Each step's error is the real node's.
func (c *Cluster) startRealNode(ctx context.Context, begin time.Time) error {
	s := &nodeStart{c: c, n: c.node, o: c.node.opts, begin: begin}
	c.node.dir = c.path("realnode")
	s.paths = newNodePaths(c.node.dir)
	for _, step := range []func(context.Context) error{
		s.checkPaths, s.sweep, s.makeDirs, s.registry, s.apiProxy, s.host,
		s.identity, s.configFiles, s.containerd, s.kubelet, s.network, s.apiService, s.dns, s.storage,
	} {
		if err := step(ctx); err != nil {
			return fmt.Errorf("real node: %w", err)
		}
	}
	return c.publishRealNode(ctx)
}

// nodeStart is one start of the real node, step by step.
type nodeStart struct {
	c     *Cluster
	n     *RealNode
	o     RealNodeOptions
	paths nodePaths
	begin time.Time
}

func (s *nodeStart) logf(format string, args ...any) { s.c.opts.Logf(format, args...) }

// since is the time since the cluster's start began, for progress lines.
func (s *nodeStart) since() time.Duration { return time.Since(s.begin).Round(time.Millisecond) }

func (s *nodeStart) checkPaths(context.Context) error {
	if len(s.paths.containerdSocket) > maxSocketPath {
		return fmt.Errorf("containerd socket path %s is longer than %d bytes: use a shorter work dir",
			s.paths.containerdSocket, maxSocketPath)
	}
	return nil
}

// sweep removes what this work dir, or a crashed earlier run, left on the
// host, then records the node's directory in the machine lock.
func (s *nodeStart) sweep(context.Context) error {
	n := s.n
	sweepDirs := []string{n.dir}
	if prev := n.lock.previousDir(); prev != "" && prev != n.dir {
		s.logf("testcluster: real node: sweeping what an earlier run left (%s)", prev)
		sweepDirs = append(sweepDirs, prev)
	}
	if err := sweepNode(n.tools.ip, sweepDirs, s.c.opts.Logf); err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	if err := sweepNodeNet(n.net.tools, s.o.NetBinDir, sweepDirs); err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	if err := n.lock.record(n.dir); err != nil {
		return err
	}
	n.started = true
	return nil
}

// makeDirs makes the node's directories afresh and saves the host's IP
// forwarding setting.
func (s *nodeStart) makeDirs(context.Context) error {
	p := s.paths
	if err := os.RemoveAll(s.n.dir); err != nil {
		return fmt.Errorf("clean %s: %w", s.n.dir, err)
	}
	for _, d := range []string{p.containerdRoot, p.containerdState, p.cniConfDir, p.cniIPAMDir,
		p.kubeletRoot, p.podLogsDir, p.volumePluginDir, p.kubeletCertDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	return saveIPForward(s.n.dir)
}

// registry starts the node's registry and pushes the pause image.
func (s *nodeStart) registry(ctx context.Context) error {
	n := s.n
	reg, err := startRegistry(filepath.Join(n.dir, "registry"), s.c.path("logs", "registry.log"))
	if err != nil {
		return err
	}
	n.registry = reg
	img, err := pauseProgram.image(ctx, s.o.CacheDir)
	if err != nil {
		return err
	}
	n.pauseImage = reg.Ref("pcsync/pause:" + pauseKey())
	if err := reg.Push(ctx, n.pauseImage, img); err != nil {
		return err
	}
	s.logf("testcluster: real node: registry %s, pause image pushed after %s", reg.Host(), s.since())
	return nil
}

// apiProxy serves the API server to the pods: a proxy on the pod gateway
// address.
func (s *nodeStart) apiProxy(context.Context) error {
	gw, err := gatewayIP(s.o.PodSubnet)
	if err != nil {
		return err
	}
	if s.n.apiProxy, err = startAPIProxy(gw.String(), strings.TrimPrefix(s.c.apiserverURL, "https://")); err != nil {
		return err
	}
	s.n.apiHost = net.JoinHostPort(s.n.apiProxy.addr())
	return nil
}

// host sets up the node IP, the Service CIDR's route, the uplinks' guard
// and the cgroups.
func (s *nodeStart) host(ctx context.Context) error {
	if err := setupNodeBridge(s.n.tools.ip, s.o.NodeIP); err != nil {
		return err
	}
	if err := routeServiceCIDR(s.n.tools.ip); err != nil {
		return err
	}
	if err := guardUplinks(ctx, s.n.tools.ip, s.n.net.tools); err != nil {
		return err
	}
	return prepareCgroups()
}

// identity issues the kubelet's certificates, kubeconfig and RBAC.
func (s *nodeStart) identity(ctx context.Context) error {
	if err := issueNodeCerts(s.c.pki, s.paths, s.o.Name, s.o.NodeIP); err != nil {
		return err
	}
	user := "system:node:" + s.o.Name
	if err := writeKubeconfig(s.paths.kubeletKubeconfig, s.c.apiserverURL, user, s.c.pki.caCert, s.paths.clientCert, s.paths.clientKey); err != nil {
		return err
	}
	return s.c.bindNodeRole(ctx, user)
}

// configFiles writes containerd's, the registry's, the CNI's and the
// kubelet's configuration.
func (s *nodeStart) configFiles(context.Context) error {
	paths, o, reg := s.paths, s.o, s.n.registry
	conflist, err := cniConflist(paths, o.PodSubnet)
	if err != nil {
		return err
	}
	pt, err := freePorts(2)
	if err != nil {
		return err
	}
	files := map[string]string{
		paths.containerdConfig: containerdConfig(paths, o.CNIBinDir, s.n.tools.runc, s.n.pauseImage),
		filepath.Join(paths.registryHostsDir, reg.Host(), "hosts.toml"): registryHostsFile(reg.Host()),
		filepath.Join(paths.cniConfDir, "10-"+cniNetwork+".conflist"):   conflist,
		paths.kubeletConfig: kubeletConfig(kubeletConfigParams{
			paths: paths, caFile: s.c.pki.caCert, nodeIP: o.NodeIP, port: pt[0], healthPort: pt[1], taint: !o.NoTaint,
		}),
		paths.resolvConf: "# pcsync real node: pods get the cluster DNS address only\n",
	}
	for _, upstream := range mirroredRegistries() {
		files[filepath.Join(paths.registryHostsDir, upstream, "hosts.toml")] = mirrorHostsFile(upstream, reg.Host())
	}
	for path, data := range files {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// containerd starts containerd and waits for its socket.
func (s *nodeStart) containerd(ctx context.Context) error {
	containerd, err := startComponent("containerd", s.n.tools.containerd,
		[]string{"--config", s.paths.containerdConfig, "--log-level", "info"}, s.c.path("logs"), nil)
	if err != nil {
		return err
	}
	s.n.containerd = containerd
	s.logf("testcluster: started containerd (pid %d)", containerd.cmd.Process.Pid)
	if err := waitSocket(ctx, containerd, s.paths.containerdSocket); err != nil {
		return containerd.failure(err)
	}
	return nil
}

// kubelet starts the kubelet and waits until its Node is schedulable.
func (s *nodeStart) kubelet(ctx context.Context) error {
	paths, o := s.paths, s.o
	args := []string{
		"--config=" + paths.kubeletConfig,
		"--kubeconfig=" + paths.kubeletKubeconfig,
		"--root-dir=" + paths.kubeletRoot,
		"--cert-dir=" + paths.kubeletCertDir,
		"--hostname-override=" + o.Name,
		"--node-ip=" + o.NodeIP,
		"--node-labels=" + RealNodeTaintKey + "=true",
	}
	if v := os.Getenv(KubeletVerbosityEnv); v != "" {
		args = append(args, "--v="+v)
	}
	kubelet, err := startComponent("kubelet", s.c.bin("kubelet"), args, s.c.path("logs"), nil)
	if err != nil {
		return err
	}
	s.n.kubelet = kubelet
	s.logf("testcluster: started kubelet (pid %d)", kubelet.cmd.Process.Pid)
	err = poll(ctx, kubelet, 100*time.Millisecond, func(ctx context.Context) (bool, string, error) {
		node, err := s.c.client.CoreV1().Nodes().Get(ctx, o.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		return nodeSchedulable(node)
	})
	if err != nil {
		if s.n.containerd.exited() {
			return s.n.containerd.failure(err)
		}
		return kubelet.failure(err)
	}
	s.logf("testcluster: real node %s Ready after %s", o.Name, s.since())
	return nil
}

// network starts kube-proxy and, if wanted, the NetworkPolicy enforcer.
func (s *nodeStart) network(ctx context.Context) error {
	s.n.net.kubeconfig, s.n.net.logDir = s.c.kubeconfigPath, s.c.path("logs")
	if err := s.n.net.start(ctx, s.o.NetworkPolicy); err != nil {
		return err
	}
	s.logf("testcluster: real node: kube-proxy (and NetworkPolicy enforcer: %v) running after %s",
		s.o.NetworkPolicy, s.since())
	return nil
}

// apiService gives the Service default/kubernetes an endpoint that pods
// reach: the API proxy on the pod gateway (the API server advertises its
// loopback address and runs no endpoint reconciler). kube-proxy on the node
// then takes its ClusterIP there, so a pod's in-cluster config (the
// kubelet's KUBERNETES_SERVICE_HOST, the serving certificate's 10.0.0.1)
// works as in any cluster.
func (s *nodeStart) apiService(ctx context.Context) error {
	host, portStr := s.n.APIServerHost()
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return fmt.Errorf("API proxy port %q: %w", portStr, err)
	}
	es := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes-real-node", Namespace: metav1.NamespaceDefault, Labels: map[string]string{
			discoveryv1.LabelServiceName: "kubernetes", discoveryv1.LabelManagedBy: "testcluster.pcsync.io"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{host}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To(int32(port)), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	slices := s.c.client.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault)
	if err := slices.Delete(ctx, es.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("EndpointSlice default/%s: %w", es.Name, err)
	}
	if _, err := slices.Create(ctx, es, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("EndpointSlice default/%s: %w", es.Name, err)
	}
	return nil
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
	cm.Data["realNodeVolumeDir"] = n.volumeDir
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
		volumeDir:  data["realNodeVolumeDir"],
	}
}
