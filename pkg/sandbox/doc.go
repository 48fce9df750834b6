// Package sandbox makes pcsync a Paperclip sandbox provider: Paperclip's
// stock adapters (claude_local, codex_local, …) run their CLI in a pod of a
// tenant namespace that the Git config declares, through the hooks of
// pcsync's plugin (integrations/paperclip-sandbox), which forwards each hook
// to the daemon's API on a Unix socket (pkg/sandbox/hookapi), which calls
// the Manager.
//
// One lease is one pod. Its main container runs pcsync's command server
// (pkg/sandbox/cmdserver) as PID 1, so it reaps every orphan; the daemon
// drives it over one long-lived pod exec per lease (pkg/sandbox/cmdclient):
// commands, stdin, output chunks and exit statuses travel as frames inside
// the stream, so a run's many executes cost no Kubernetes request each and
// no env value or stdin ever appears in a request URL.
//
// A lease's life (lease_state.go): pending (config, image and the
// credentials' Secrets checked → journal → pod create) → ready (the pod runs; executes) → draining (a
// release waits for the executes in flight) → ending (command server
// shutdown → pod delete → gone → journal drop) → gone (termination
// receipt). A cancel, the expiry or a failure skips draining. A kept
// lease (Paperclip's reuseLease and runnerLifecycleMode warm) of a company
// with spec.sandbox.suspend mounts a claim named as it for its workspace
// and HOME; idle, it is suspended (its pod deleted, its claim kept) and
// the next execute or resume creates its pod again on the claim. The expiry deletes the pod too, and the
// pod's activeDeadlineSeconds stops it even with no pcsync left.
//
// A warm pool (Company spec.sandbox.warmPool) keeps pods Ready that a
// lease claims instead of waiting for a pod start (pkg/sandbox/pool keeps
// the pools, manager_claim.go claims): a member is the pod
// leasepod.BuildPod makes, with no role, run, agent or lease label (no
// egress policy selects it, the tenant's deny-all does) and nothing of a
// run in its spec. An acquire whose pod spec is a pool's (the members' spec
// hash) takes a Ready member with one patch whose resourceVersion is a
// precondition, and the pool refills at once; a claimed member is the
// lease's pod and ends with it, never back in the pool. The daemon opens a
// Ready member's command stream before any claim, and the lease that
// claims it takes that stream (its first execute waits for no pod exec).
//
// The command protocol's frames are in pkg/sandbox/wire, shared by the
// command server and its client. A lease's record and the pod built from
// it are in pkg/sandbox/leasepod, shared by the Manager and the pools.
//
// Files:
//
//	options.go          Options and their defaults; the provider key
//	envconfig.go        the environment config Paperclip stores: parse, check against the pcsync config, normalize
//	envfilter.go        EnvRule: which env keys of an execute reach the pod (never the server's secrets)
//	lease_state.go      the lease's life as a state machine: its states, the transition table, to; draining and ending
//	code.go             Code, the stable words of refusals and diagnostics; UserError; BadRequestError
//	journal.go          the lease journal in the state directory
//	manager.go          Manager: adoption at start, lease registry, Close
//	manager_acquire.go  Acquire (its credentials' Secrets checked: secretcheck.Guard): the lease's plan, its expiry, its pod created; Resume, Workspace
//	manager_wait.go     waiting for the pod to run (internal/lib/podwait); why it will not (podRunning), and what an unschedulable one asked of its node
//	manager_open.go     opening a lease's command stream (wait.Backoff), one open shared by its callers; connect: a ready lease's stream opened in the background
//	manager_acquire_early.go  a cold lease's command server tried from its pod's create on: ready when it answers, before the kubelet's status says Running
//	manager_claim.go    startPod: claim a Ready member of a warm pool (a patch with resourceVersion and UID preconditions, no lock), else create; the pools shrink for quota room
//	manager_pools.go    the warm pools' controller (package pool) started with the Manager's deps; ConfigChanged, Pools
//	warm_stream.go      a Ready member's command stream opened ahead of its claim; the claim takes it, a member that goes closes it
//	manager_prestart.go Prestart: a run's lease begun when Paperclip starts the run (agent.run.started, forwarded by the plugin), taken by the run's acquire, deleted when none takes it
//	manager_execute.go  ExecuteStream: one command on a lease, its env filtered, its stdin and output streams; Execute: the same with the output whole
//	proxy_env.go        egress mode proxy: the proxy's variables on every execute
//	manager_proxy_wait.go  egress mode proxy: a lease whose proxy was scaled to zero waits for it, from its pod, before its acquire returns
//	manager_sync.go     Put and Get: one mapping of Paperclip's native workspace sync as one command of the lease's stream (a file, or a tree as a tar), streamed
//	manager_release.go  Release and the expiry: drain, shutdown, delete, wait gone (internal/lib/podwait); a kept lease's claim deleted
//	manager_suspend.go  the kept leases' idle loop: suspend (journal, pod deleted and gone, claim kept); ensureReady: an execute waits for a suspend or resume, resumes a suspended lease
//	manager_resume.go   resume: a suspended lease's pod created again on its claim (create-if-absent under the lease's name), today's placement and helper
//	manager_claims.go   the kept leases' claims: which lease keeps one (keepOf), create, delete, gone (storage_gone), why a pod on one did not start; rebuilt into the journal at start; orphans swept
//	manager_probe.go    Validate and Probe: an environment's config checked, and what a lease of it needs, without a lease; their results (the hooks' answers as they are)
//	stream.go           the command stream as a pod exec
//	exec_protocol.go    ExecProtocol: the exec's protocol (auto: WebSocket, SPDY fallback; websocket; spdy)
//	metrics.go          Metrics the manager reports to (pcsync_sandbox_*), its outcome and end words
package sandbox
