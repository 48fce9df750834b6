// Package sandbox makes pcsync a Paperclip sandbox provider: Paperclip's
// stock adapters (claude_local, codex_local, …) run their CLI in a pod of a
// tenant namespace that the Git config declares, through the hooks of
// pcsync's plugin (integrations/paperclip-sandbox), which forwards each hook
// to the daemon's API on a Unix socket.
//
// One lease is one pod. Its main container runs pcsync's command server
// (pkg/sandbox/cmdserver) as PID 1, so it reaps every orphan; the daemon
// drives it over one long-lived pod exec per lease (pkg/sandbox/cmdclient):
// commands, stdin, output chunks and exit statuses travel as frames inside
// the stream, so a run's many executes cost no Kubernetes request each and
// no env value or stdin ever appears in a request URL.
//
// A lease's life: acquire (config and image checked → journal → pod create
// → running → command server answers) → executes → release or destroy
// (drain or cancel → command server shutdown → pod delete → gone → journal
// drop → termination receipt). The expiry deletes the pod too, and the
// pod's activeDeadlineSeconds stops it even with no pcsync left.
//
// The command protocol's frames are in pkg/sandbox/wire, shared by the
// command server and its client.
//
// Files:
//
//	options.go          Options and their defaults; the provider key
//	envconfig.go        the environment config Paperclip stores: parse, check against the pcsync config, normalize
//	envfilter.go        EnvRule: which env keys of an execute reach the pod (never the server's secrets)
//	lease.go            the lease record, its states, ids and paths
//	pod_build.go        BuildPod: the hardened lease pod
//	journal.go          the lease journal in the state directory
//	manager.go          Manager: adoption at start, lease registry, Close
//	manager_acquire.go  Acquire, Resume, Workspace; waiting for the pod; opening the command stream
//	manager_execute.go  Execute: one command on a lease
//	manager_release.go  Release and the expiry: shutdown, delete, wait gone
//	stream.go           the command stream as a pod exec (WebSocket, SPDY fallback)
//	api.go              API: the hooks on the Unix socket
//	metrics.go          Metrics the manager reports to (pcsync_sandbox_*), its outcome and end words
package sandbox
