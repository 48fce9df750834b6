package testcluster

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// Names the real node uses on the host. They are fixed because there is one real
// node per machine at a time (the lock), and a later start sweeps them after a crash.
const (
	// nodeBridge holds the node IP as a /32 (the kernel here has no dummy driver).
	nodeBridge = "pcsync-node0"
	// podBridge is the CNI bridge the pods' veths attach to.
	podBridge = "pcsync-cni0"
	// cniNetwork names the CNI network (and its cache files in /var/lib/cni).
	cniNetwork = "pcsync-realnode"
	// cgroupParent is the kubelet's cgroupRoot: the pods' cgroups live under
	// /<cgroupParent>/kubepods in every hierarchy, apart from any other kubelet's.
	cgroupParent = "pcsync-realnode"
	// clusterDNSIP is the cluster DNS address given to pods (the kubelet's
	// clusterDNS): the ClusterIP of the Service kube-system/kube-dns, in front of
	// the CoreDNS pod the node runs (realnode_dns.go).
	clusterDNSIP = "10.0.0.10"
)

// nodePaths are the files and directories of one real node, all under dir
// (<work dir>/realnode).
type nodePaths struct {
	dir                               string
	containerdConfig, containerdRoot  string
	containerdState, containerdSocket string
	cniConfDir, cniIPAMDir            string
	kubeletConfig, kubeletRoot        string
	kubeletKubeconfig, kubeletCertDir string
	podLogsDir, volumePluginDir       string
	servingCert, servingKey           string
	clientCert, clientKey, resolvConf string
	registryHostsDir                  string
}

func newNodePaths(dir string) nodePaths {
	j := func(elem ...string) string { return filepath.Join(append([]string{dir}, elem...)...) }
	return nodePaths{
		dir:               dir,
		containerdConfig:  j("containerd", "config.toml"),
		containerdRoot:    j("containerd", "root"),
		containerdState:   j("containerd", "state"),
		containerdSocket:  j("containerd", "containerd.sock"),
		cniConfDir:        j("cni", "net.d"),
		cniIPAMDir:        j("cni", "ipam"),
		kubeletConfig:     j("kubelet", "config.yaml"),
		kubeletRoot:       j("kubelet", "root"),
		kubeletKubeconfig: j("kubelet", "kubeconfig"),
		kubeletCertDir:    j("kubelet", "pki"),
		podLogsDir:        j("kubelet", "pod-logs"),
		volumePluginDir:   j("kubelet", "volume-plugins"),
		servingCert:       j("kubelet", "pki", "serving.crt"),
		servingKey:        j("kubelet", "pki", "serving.key"),
		clientCert:        j("kubelet", "pki", "client.crt"),
		clientKey:         j("kubelet", "pki", "client.key"),
		resolvConf:        j("kubelet", "resolv.conf"),
		registryHostsDir:  j("containerd", "certs.d"),
	}
}

// maxSocketPath is the longest path a unix socket may have (sun_path is 108 bytes,
// one of them the terminating NUL).
const maxSocketPath = 107

// containerdConfig is containerd's config.toml (version 2) for the node: state,
// root and socket under the node's directory; the CRI plugin with runc v2 on
// cgroupfs, overlayfs, no AppArmor, restricted oom_score_adj (root here lacks
// CAP_SYS_RESOURCE), the stream server on 127.0.0.1, the CNI bridge, network
// namespaces under the state directory, and registries configured by hosts.toml
// files under registryHostsDir (the local one over plain HTTP: registryHostsFile).
func containerdConfig(p nodePaths, cniBinDir, runcBin, sandboxImage string) string {
	q := strconv.Quote
	return fmt.Sprintf(`version = 2
root = %s
state = %s
disabled_plugins = [
  "io.containerd.internal.v1.opt",
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp",
]

[grpc]
  address = %s

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %s
  disable_apparmor = true
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  netns_mounts_under_state_dir = true
  enable_selinux = false
  max_container_log_line_size = 65536

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = %s

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %s
    conf_dir = %s
    max_conf_num = 1

  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = %s
`, q(p.containerdRoot), q(p.containerdState), q(p.containerdSocket), q(sandboxImage), q(runcBin),
		q(cniBinDir), q(p.cniConfDir), q(p.registryHostsDir))
}

// registryHostsFile is the hosts.toml (in registryHostsDir/<host>/) that makes
// containerd pull images named <host>/… from that registry over plain HTTP.
func registryHostsFile(registryHost string) string {
	q := strconv.Quote
	return fmt.Sprintf(`server = %s

[host.%s]
  capabilities = ["pull", "resolve"]
`, q("http://"+registryHost), q("http://"+registryHost))
}

// mirroredRegistries are the public registries whose images the node's
// containerd pulls from the node's registry instead (a mirror, as in an
// air-gapped cluster): the images deploy/ names, so that an overlay applies
// word for word.
func mirroredRegistries() []string { return []string{"ghcr.io", "registry.k8s.io"} }

// mirrorHostsFile is the hosts.toml (in registryHostsDir/<upstream>/) that
// makes containerd pull images named <upstream>/<path> from
// registryHost/<path> over plain HTTP, and from nowhere else (the upstream
// is never asked when the mirror answers; off the machine it is unreachable).
func mirrorHostsFile(upstream, registryHost string) string {
	q := strconv.Quote
	return fmt.Sprintf(`server = %s

[host.%s]
  capabilities = ["pull", "resolve"]
`, q("https://"+upstream), q("http://"+registryHost))
}

// cniConflist is the pods' network: a bridge (the node is its gateway, no
// masquerading, so no iptables rules) with host-local IPAM keeping its state under
// the node's directory. containerd adds the loopback interface itself with the
// loopback plugin from the same bin directory.
func cniConflist(p nodePaths, podSubnet string) (string, error) {
	conf := map[string]any{
		"cniVersion": "0.4.0",
		"name":       cniNetwork,
		"plugins": []any{map[string]any{
			"type":        "bridge",
			"bridge":      podBridge,
			"isGateway":   true,
			"ipMasq":      false,
			"hairpinMode": false,
			"ipam": map[string]any{
				"type":    "host-local",
				"ranges":  []any{[]any{map[string]any{"subnet": podSubnet}}},
				"routes":  []any{map[string]any{"dst": "0.0.0.0/0"}},
				"dataDir": p.cniIPAMDir,
			},
		}},
	}
	b, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return "", fmt.Errorf("CNI config: %w", err)
	}
	return string(b) + "\n", nil
}

// kubeletConfigParams are the values of one kubelet's configuration file.
type kubeletConfigParams struct {
	paths      nodePaths
	caFile     string
	nodeIP     string
	port       int
	healthPort int
	taint      bool
}

// kubeletConfig is the kubelet's KubeletConfiguration: serving on the node IP with
// a certificate from the cluster CA, webhook authentication and authorization (so
// the API server's exec and logs requests are checked against RBAC), cgroupfs
// under cgroupParent, cgroup v1 accepted, no swap check, no eviction on disk
// signals (as kind sets it: the disk is the machine's, shared with every other
// build, and a node under DiskPressure refuses the pods the scheduler gives
// it, which a test reads as a hang), and containerd's socket.
func kubeletConfig(k kubeletConfigParams) string {
	q := strconv.Quote
	taints := "[]"
	if k.taint {
		taints = fmt.Sprintf("[{key: %s, value: \"true\", effect: NoSchedule}]", q(RealNodeTaintKey))
	}
	lines := []string{
		"apiVersion: kubelet.config.k8s.io/v1beta1",
		"kind: KubeletConfiguration",
		"address: " + q(k.nodeIP),
		"port: " + strconv.Itoa(k.port),
		"readOnlyPort: 0",
		"healthzBindAddress: 127.0.0.1",
		"healthzPort: " + strconv.Itoa(k.healthPort),
		"tlsCertFile: " + q(k.paths.servingCert),
		"tlsPrivateKeyFile: " + q(k.paths.servingKey),
		"rotateCertificates: false",
		"serverTLSBootstrap: false",
		"authentication:",
		"  anonymous: {enabled: false}",
		"  webhook: {enabled: true, cacheTTL: 30s}",
		"  x509: {clientCAFile: " + q(k.caFile) + "}",
		"authorization:",
		"  mode: Webhook",
		"  webhook: {cacheAuthorizedTTL: 30s, cacheUnauthorizedTTL: 5s}",
		"cgroupDriver: cgroupfs",
		"cgroupRoot: " + q("/"+cgroupParent),
		"failCgroupV1: false",
		"failSwapOn: false",
		"containerRuntimeEndpoint: " + q("unix://"+k.paths.containerdSocket),
		"clusterDNS: [" + q(clusterDNSIP) + "]",
		"clusterDomain: " + ClusterDomain,
		"resolvConf: " + q(k.paths.resolvConf),
		"registerWithTaints: " + taints,
		"podLogsDir: " + q(k.paths.podLogsDir),
		"volumePluginDir: " + q(k.paths.volumePluginDir),
		"serializeImagePulls: false",
		"imageGCHighThresholdPercent: 100",
		"imageGCLowThresholdPercent: 99",
		"evictionHard: {memory.available: 50Mi, nodefs.available: \"0%\", nodefs.inodesFree: \"0%\", imagefs.available: \"0%\"}",
		"maxPods: 110",
		"syncFrequency: 10s",
		"fileCheckFrequency: 1h",
		"httpCheckFrequency: 1h",
		"nodeStatusUpdateFrequency: 10s",
		"shutdownGracePeriod: 0s",
		"logging: {verbosity: 1}",
	}
	return strings.Join(lines, "\n") + "\n"
}
