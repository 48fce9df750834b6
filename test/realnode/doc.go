// Package realnode proves, on a real kubelet, what kwok cannot: that pcsync's
// pods run, and what their NetworkPolicies isolate. TestMain starts
// internal/testing/testcluster with its real node (kubelet, containerd, runc, a CNI
// bridge, kube-proxy, and kube-router enforcing NetworkPolicies; root and
// Debian's packages needed: Start says what to install; nothing is skipped). Every test is in a file tagged
// `integration`, and they run one at a time: one real node per machine.
//
// Its files:
//
//	realnode_test.go  the harness itself: pods of its pause image (which also
//	                  prints, copies stdin and exits with a chosen code) run,
//	                  log and exec under Pod Security "restricted"; Jobs end
//	images_test.go    pcsync's images, built once per test binary from make
//	                  images' definitions (internal/imagebuild, cached) and
//	                  pushed to the node's registry, with a stand-in claude
//	                  (a shell script on the base; its prompt picks what it
//	                  does) beside the real Claude Code image
//	runs_test.go      runs from the spool through the Kubernetes executor:
//	                  success with tokens and cost and a millisecond duration,
//	                  a classified failure, cancel and timeout of a CLI with no
//	                  SIGTERM handler and of one that ignores SIGTERM, a
//	                  missing image, the real Claude Code CLI without a key
//	acp_test.go       the ACP agent servers of the real claude and codex
//	                  images answer ACP's initialize in a lease pod
//	sandbox_test.go   sandbox leases: pcsync's image with no helper container,
//	                  executes, the filesystem, release; a user's image with
//	                  the helper container, and its failed hook; a missing
//	                  image
//	keptlease_test.go kept leases suspended and resumed on a local-path claim:
//	                  a 100 MB / 10,000-file workspace with git and a CLI
//	                  session byte for byte; resume against a cold acquire
//	workspace_sync_test.go  Paperclip's native workspace sync through the
//	                  plugin's hooks (testdata/workspace-sync.mjs), the daemon
//	                  and a lease pod: modes, excludes, symlinks, post-upload
//	                  commands, a 10 MB tree byte for byte; and its benchmark
//	                  against adapter-utils' base64 fallback
//	pool_env_test.go  a tenant with warm pools whose config the test rewrites,
//	                  and the pool daemon subprocess a test SIGKILLs
//	pool_test.go      warm pools: 20 acquires against a pool of 5, egress
//	                  not selected until a claim, quota pressure, a daemon
//	                  killed mid-refill, adoption, a changed image, removal
//	pool_bench_test.go make bench's pool figures: warm vs cold acquire, a
//	                  burst with and without a pool, the idle members' cost
//	                  and the API requests of a claim
//	deploy_test.go    pcsync's own Deployment (deploy/base, an overlay swapping
//	                  only what cannot run here) from its own image: both
//	                  replicas Ready, the leader reconciles through its
//	                  in-cluster config, /readyz through the pod proxy; the
//	                  same with Helm's chart (TestChartDeployment)
//	chart_test.go     charts/pcsync rendered by helm as the base of that
//	                  overlay, beside the Namespace a user makes first
//	argocd_test.go    deploy/argocd as its README has a user apply it (a
//	                  stand-in of Argo CD's repo-server Deployment): the
//	                  sidecar from pcsync's image, uid 999, read-only root;
//	                  the mounted plugin's discover, init and generate in it
//	                  on examples/config print what pcsync render prints
//	gitsync_test.go   deploy/base through a user's overlay, its git-sync (a
//	                  substitute: testdata/git-sync-substitute.sh, Debian's
//	                  git on the base image; k8s.io/git-sync is not served)
//	                  following a repository the test serves
//	                  (gitserver_test.go: git http-backend on the pod
//	                  bridge's gateway): Ready, the Company applied, a new
//	                  commit picked up, a run from the spool volume a Job
//	getting_started_test.go  docs/getting-started.md followed word for word
//	                  from its section 2 (the harness's cluster and images
//	                  stand in for k3d's and Docker's): a clone of an empty
//	                  config repository, deploy/base, the key, a first run
//	                  and its result
//	paperclip_test.go deploy/paperclip through a user's overlay: Paperclip's
//	                  stand-in image (imagebuild.PaperclipStandIn, from the
//	                  paperclipai npm package), pcsync and git-sync Ready in
//	                  one pod, the Company committed to Git applied
//	bench_test.go     make bench's figures on the real node, each beside its
//	                  peer (a plain pod, a bare exec, a bare delete, a bare
//	                  Job)
//	service_test.go   a pod reaches another through a ClusterIP Service
//	volume_test.go    dynamic volumes: a claim of the default StorageClass
//	                  (local-path-provisioner) bound at its first pod, files
//	                  kept across pods, the directory gone with the claim
//	clusterdns_test.go  the cluster DNS (CoreDNS): a Service of another
//	                  namespace resolved to its ClusterIP, other names refused;
//	                  a policy that leaves DNS out denies it, beside one that
//	                  allows it as pcsync's does
//	proxy_bench_test.go  make bench's egress-proxy figures (issue 38): HTTPS
//	                  requests and a 50 MB download through a tenant's proxy
//	                  against a standard-mode tenant's direct allowCidrs path,
//	                  the proxy's RSS idle and under 50 tunnels, a Job's
//	                  drop → Running with and without the proxy's env
//	                  (proxy_bench_env_test.go builds the world)
//	enforce_test.go   the enforcement matrix of egress mode standard: from a
//	                  Job's pod, a lease pod, an unclaimed pool member,
//	                  another tenant's agent and a pod without policies, to
//	                  DNS, the server's port and another, allowCidrs, a public
//	                  and a metadata stand-in (in a network namespace the test
//	                  makes: internal/testing/testnet), tenants' pods, the kubelet and
//	                  the API server; every target first reached with the
//	                  enforcer stopped (enforce_env_test.go builds the world)
//	enforcer_switch_test.go  the enforcer stopped and started at run time
//	probe_test.go     the probes: exec, /pause -dial and its Node.js twin
//	credentials_test.go  spec.credentials (issue 40): a Job pod's request
//	                  through the proxy's credential route, a forged token
//	                  refused, no key in its processes, spec or Secret
//	credentials_cli_test.go  the real Claude Code and Codex CLIs in Job and
//	                  lease pods through two tenants' proxies, one to a
//	                  LiteLLM-shaped gateway; refusals; the keys searched
//	                  for everywhere (credentials_cli_checks_test.go), the
//	                  stand-in APIs in credentials_standin_test.go
//	credentials_git_test.go  a github credential (issue 56): git clone and
//	                  push through the route to a GitHub stand-in, the
//	                  token searched for everywhere, a run's token refused
//	                  from another pod and once its run ended;
//	                  BenchmarkGitClone (credentials_git_env_test.go
//	                  builds the world)
package realnode
