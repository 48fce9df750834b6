// Package testcluster runs a real Kubernetes control plane for pcsync's integration
// tests and for `make dev-cluster`: etcd, kube-apiserver (RBAC, Pod Security
// admission, an audit log of mutating requests), kube-controller-manager (service
// accounts, Job, CronJob, garbage collector, namespace, TTL-after-finished,
// ResourceQuota, pod GC, ReplicaSet, Deployment, node lifecycle), kube-scheduler and
// kwok playing one node. Everything listens on 127.0.0.1 with free ports and
// certificates generated at start (ECDSA P-256). Nothing runs in a container: kwok
// fakes the pods' lifecycle from their labels, as described below — unless a test
// binary opts in to a real node (kubelet, containerd, runc; see "Real node").
//
// # Binaries
//
// The five executables (six with the real node's kubelet) come from
// hack/k8sbin/build.sh (`make k8sbin`), which builds
// them once per version set into DefaultBinDir(): $PCSYNC_K8S_BIN_DIR, else
// ${XDG_CACHE_HOME:-$HOME/.cache}/pcsync/k8sbin/<VersionKey()>. If they are missing,
// Start fails with ErrBinariesMissing, which says to run `make k8sbin`.
//
// # Using it in tests
//
// One cluster per test binary, started by TestMain; each test works in namespaces of
// its own. These are integration tests: the files that hold them and the TestMain
// start with the build constraint `//go:build integration`, so that `go test ./...`
// runs the unit tests alone and `make test` (`go test -tags integration ./...`) runs
// everything:
//
//	//go:build integration
//
//	func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }
//
//	func TestSomething(t *testing.T) {
//		c := testcluster.Get(t)
//		ns := c.Namespace(t, "something", nil) // deleted when the test ends
//		cs, _ := kubernetes.NewForConfig(c.RESTConfig())
//		...
//	}
//
// With PCSYNC_TEST_KUBECONFIG=/path/to/kubeconfig (e.g. the dev cluster's
// .dev/kubeconfig) Main attaches to that running cluster instead of starting one,
// which saves the ~6 s start. PCSYNC_TEST_KEEP_WORKDIR=1 keeps the started cluster's
// work directory (component logs, audit log) after the tests. Main never skips: a missing binary or a failed start
// fails the test binary, with the tail of the failing component's log. If the test
// binary dies (panic, -timeout, SIGKILL), the kernel kills the components too
// (Pdeathsig); SIGINT/SIGTERM make Main stop them in order.
//
// # Choosing what a pod does
//
// pcsync creates its Jobs' pods itself and copies only the agent's `labels` onto them,
// so every outcome is chosen by pod labels (label values: at most 63 characters of
// [A-Za-z0-9._-]). Put these labels in an agent's config (or a pod template):
//
//	label sim.pcsync.io/outcome   what happens
//	(absent), pod owned by a Job  Running, then Succeeded after 500 ms (exit 0, Completed)
//	(absent), any other pod       Running until deleted
//	run                           Running until deleted (also for a Job's pod)
//	succeed                       Running, then Succeeded after delay-ms
//	fail                          Running, then Failed after delay-ms: every container
//	                              terminated with reason (default Error), exit-code
//	                              (default 1) and message (default none)
//	image-pull                    Pending, containers waiting with reason (default
//	                              ImagePullBackOff; or ErrImagePull) and a message
//	pending                       Pending, containers waiting in ContainerCreating
//	unschedulable                 Pending, PodScheduled=False reason Unschedulable
//	                              (the real scheduler: an admission policy gives the pod
//	                              a node selector no node matches)
//
// Parameters, all labels: sim.pcsync.io/delay-ms (milliseconds from Running to the end,
// default 500), sim.pcsync.io/reason, sim.pcsync.io/exit-code, sim.pcsync.io/message
// (label-value characters only; an annotation sim.pcsync.io/message, if present, wins
// and may hold any text) and sim.pcsync.io/container (fail only that container; the
// others exit 0). The helpers build the label maps:
//
//	SucceedAfter(2*time.Second)          // outcome=succeed, delay-ms=2000
//	FailWith("Error", 1, time.Second)    // outcome=fail, reason=Error, exit-code=1
//	OOMKilled(0)                         // outcome=fail, reason=OOMKilled, exit-code=137
//	ImagePullFailure("ErrImagePull")     // outcome=image-pull, reason=ErrImagePull
//	Unschedulable(), PendingForever(), RunForever()
//	Merge(OOMKilled(0), map[string]string{"app": "x"})
//
// A Job whose pod fails this way fails like a real one (with backoffLimit 0:
// condition Failed, reason BackoffLimitExceeded); activeDeadlineSeconds,
// ttlSecondsAfterFinished, garbage collection and namespace deletion behave as in a
// real cluster, because the real controllers run.
//
// # Container logs
//
// kwok serves container logs from files in CRI format
// (`<RFC3339Nano> stdout F <text>` per line), through the real API server's pods/log
// (kubectl logs, client-go GetLogs, with Follow too):
//
//	src, err := c.ServeLogs(ctx, ns, nil, []string{"first line"})  // every pod in ns
//	src, err := c.ServeLogs(ctx, ns, []string{"pod-a"}, lines)     // pod-a only
//	err = src.Append("another line")                               // a follower sees it
//
// ServeLogs returns once kwok serves the file. Register the namespace rule before
// pcsync creates the Job (Job pod names are generated). kwok never ends a follow stream, not even when the pod has finished; a
// follower must stop on its own, e.g. when the pod reaches a terminal phase (a real
// kubelet ends the stream). The files are written where the cluster's kwok can read
// them (same machine).
//
// # Observing requests
//
// MetricsText returns the API server's /metrics; RequestCounts parses
// apiserver_request_total. AuditEvents reads the audit log, which records every
// request except get/list/watch with user, user agent, verb and object: a test can
// assert that a client made no mutating request by filtering on its user agent or
// namespace.
//
// # A proxy in front of the API server
//
// StartHTTPProxy puts a reverse proxy on plain HTTP at 127.0.0.1 in front of the API
// server; it presents the admin's credentials, so its RESTConfig and KubeconfigPath
// carry none. HTTPProxyOptions.RefuseWebSocket makes it answer every WebSocket
// upgrade 403, as a proxy or load balancer that breaks WebSocket upgrades does, while
// SPDY's upgrade and everything else pass; HoldUpgrades makes it never answer an
// upgrade (every pod exec hangs until its client gives up); Counts says which
// upgrades it saw:
//
//	p := c.StartHTTPProxy(t, testcluster.HTTPProxyOptions{RefuseWebSocket: true})
//	cfg := p.RESTConfig()        // an exec through it falls back to SPDY
//	n := p.Counts().WebSocket    // WebSocket upgrades asked for (and refused)
//
// # Real node
//
// Options.RealNode adds a real node beside kwok's: the kubelet (built by
// hack/k8sbin with the rest), Debian's containerd and runc, and a CNI bridge, on
// this machine, joined to the same control plane. Its pods run real containers from
// images in a registry on 127.0.0.1 that the harness serves in-process
// (go-containerregistry's, blobs on disk) and that containerd trusts over plain
// HTTP. The harness builds the sandbox image itself (no internet): a static Go
// program, internal/testing/testcluster/pause, packed as /pause in a one-layer image. A
// test binary opts in from its TestMain:
//
//	func TestMain(m *testing.M) {
//		os.Exit(testcluster.MainWith(m, func(o *testcluster.Options) {
//			o.RealNode = &testcluster.RealNodeOptions{} // defaults
//		}))
//	}
//
//	func TestX(t *testing.T) {
//		c := testcluster.Get(t)
//		node := c.RealNode()
//		ref := node.Registry().Ref("agents/claude:1")
//		err := node.Registry().Push(ctx, ref, img) // a go-containerregistry v1.Image
//		spec := corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: ref}}}
//		node.Pin(&spec) // nodeSelector kubernetes.io/hostname=<node.Name()> + toleration
//		...
//	}
//
// With RealNodeOptions.Lazy the node starts at the first RealNode call (and
// RealNodeError says why it did not): a package whose few tests need it runs
// the others while another package holds the machine's one node.
//
// The node (default name real-node-0) carries the taint pcsync.io/real-node=true:
// NoSchedule (unless RealNodeOptions.NoTaint), so kwok keeps every pod that does not
// ask for the real node; pcsync agents reach it with the agent's nodeSelector and
// tolerations. Logs (`kubectl logs -f` ends when the container exits), exec (stdin
// EOF and exit codes come through), Jobs and Pod Security "restricted" behave as in
// a real cluster. PauseImage() doubles as a test container: `/pause -print hi`
// prints and sleeps until SIGTERM, `/pause -cat -print done -exit 3` copies stdin,
// prints and exits 3.
//
// What it needs: Linux, root, the containerd, runc and containernetworking-plugins
// packages (hack/realnode/install.sh; .ci/run calls it), the Go toolchain (for the
// pause program, built once into RealNodeOptions.CacheDir) and cgroups. If
// something is missing Start fails and names it; it never skips. The node IP
// (default 10.200.0.1) is a /32 on a bridge with no ports, pcsync-node0; pods get
// addresses from 10.201.0.0/24 on the bridge pcsync-cni0 (no masquerading: they reach
// the host at 10.201.0.1, not its 127.0.0.1 or the internet; kube-proxy takes
// Service IPs to their endpoints); the kubelet's cgroups live under
// /pcsync-realnode.
//
// Cluster DNS: pods' resolv.conf names RealNode.ClusterDNS (10.0.0.10), the
// Service kube-system/kube-dns in front of CoreDNS (built by `make k8sbin` into
// DefaultAddonBinDir), which the harness runs in a pod on the node, labelled
// k8s-app: kube-dns as in a cluster, so that NetworkPolicies select it as they
// would there. It serves ClusterDomain from the API server and refuses every
// other name: nothing is forwarded off the machine.
//
// A pod reaches the API server at APIServerHost(): 10.201.0.1 and a port the
// starting process forwards to the API server on 127.0.0.1 (TCP only, TLS passes
// through; the serving certificate holds 10.201.0.1 and 10.0.0.1). The Service
// default/kubernetes has that address as its endpoint (an EndpointSlice the
// start writes), so kube-proxy on the node takes 10.0.0.1:443 there and a pod's
// in-cluster config works as in any cluster. A container may also set
// KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT to it:
//
//	host, port := node.APIServerHost()
//	env := []corev1.EnvVar{{Name: "KUBERNETES_SERVICE_HOST", Value: host},
//		{Name: "KUBERNETES_SERVICE_PORT", Value: port}}
//
// Dynamic volumes: the harness runs rancher/local-path-provisioner (built by
// `make k8sbin` into DefaultAddonBinDir, hack/addons) as a process beside the
// node, out of cluster with the admin kubeconfig, and creates the StorageClass
// LocalPathStorageClass ("local-path": WaitForFirstConsumer, Delete, the
// cluster's default, the real node only). A claim binds when a pod that uses
// it is scheduled; its volume is a directory under RealNode.VolumeDir (<work
// dir>/realnode/volumes), made and removed by helper pods in the namespace
// local-path-storage that run the harness's own static program
// (internal/testing/testcluster/volhelper, packed like the pause program). The
// node's stop, and a later start's sweep after a crash, remove that directory
// with whatever it holds.
//
// The node's containerd pulls images of ghcr.io and registry.k8s.io from the
// node's registry (a mirror, as air-gapped clusters have): a test pushes the
// image a manifest names, e.g. ghcr.io/paperclipai/paperclip:<tag>, to
// MirrorRef's reference, and the manifest applies unchanged.
//
// One real node per machine: the kubelet and containerd share host paths and the
// bridges, so Start takes a machine-wide lock (flock on RealNodeOptions.LockPath,
// default /run/pcsync-realnode.lock) for the node's lifetime; another test binary
// wanting one waits, saying for whom, up to RealNodeOptions.LockTimeout (default
// 15 minutes). The lock file names the holder's node directory while it runs.
//
// Cleanup: Close cordons the node, deletes its pods through the API and waits for
// the kubelet to remove them, stops the kubelet, then containerd, then sweeps: it
// kills what is left in the node's cgroups and containerd's shims (they outlive
// containerd), unmounts everything under <work dir>/realnode (the kubelet's bind
// mount of its root, volumes, container root filesystems, network namespaces),
// removes the cgroups, both bridges and the CNI cache files. A start does the same
// sweep first, for the node directory a crashed run left in the lock file.
// PCSYNC_TEST_KEEP_WORKDIR=1 keeps the work directory (logs/kubelet.log,
// logs/containerd.log, logs/registry.log, realnode/) after the sweep.
//
// Measured here (2 cores, other builds alongside): the node is Ready 1.1–1.9 s after
// the control plane (8–9 s for Start in all on a quiet machine); pod create →
// Running p50 1–2 s; kubelet 90 MB and containerd 52 MB resident; Close takes
// 0.2–5 s more. docs/development/testcluster.md has the rest.
//
// A cluster started with a real node records it in its ConfigMap
// kube-system/pcsync-testcluster, so RealNode() of a Cluster reached with Attach
// returns its name, pause image and registry (Push works over HTTP, from the same
// machine).
//
// # Limits
//
// kwok runs nothing: no container processes, no NetworkPolicy enforcement (the
// objects are stored and validated only), startedAt equals the Running time.
package testcluster
