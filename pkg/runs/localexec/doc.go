// Package localexec is pcsync's local executor: it runs each run as a
// local process, the agent CLI under a run shim (ShimMain, `pcsync daemon
// run-shim`) that leads the run's process group and records how the agent
// ended. The agent's output goes to files in the state directory
// (<state>/runs/<name>/, see package runs), which the executor follows into
// <name>.log and the adapter's parser; a run therefore outlives the daemon
// that started it, and the next daemon adopts it (pid, process start time
// and boot id tell the shim from a later process with its pid).
//
// Files are split by verb: executor.go (Options, New), start.go, adopt.go,
// handle.go (following a run, deadline, cancel), follow.go (output into the
// log and the parser), ending.go (the result), shim.go, state.go (the run's
// state file) and proc_*.go (process identity).
package localexec
