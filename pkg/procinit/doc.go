// Package procinit is PID 1 of an agent container: `pcsync init -- CMD…`.
//
// A coding-agent CLI started as a container's command is its PID 1, and the
// kernel delivers no signal to PID 1 that it has no handler for: a Node.js
// CLI that never installs a SIGTERM handler ignores the kubelet's SIGTERM
// and runs on (and spends) until the grace period's SIGKILL. Its orphaned
// children are never reaped either. Run starts the command in a process
// group of its own instead, forwards every catchable signal to that group,
// reaps every child and orphan, and exits with the command's status (128+n
// when a signal ended it), as a shell would.
//
// Run also writes a Record, the command's start and end on the container's
// clock to the millisecond, its exit code and signal, to the container's
// termination-message file and as the last line of its standard output. The
// kubelet reports container times in whole seconds, and a container's end
// only on its next status sync (about a second later); pcsync's Kubernetes
// executor reads the Record from the log it follows the moment it is
// written, and from the container's terminated state (ParseRecord).
//
// Files:
//
//	run.go     Run and its Options: start, forward, reap, exit
//	record.go  Record: what Run writes for the executor, and ParseRecord
//	wait.go    --wait-proxy: the CLI starts once its egress proxy answers
package procinit
