// Package runs is pcsync's run loop: it watches a spool directory for run
// requests, validates them against the CUE Run schema and the loaded config,
// queues them per agent (FIFO, at most the agent's concurrency at once),
// hands them to an Executor (a local process, or a Kubernetes Job), streams
// their output into <name>.log and writes <name>.result.json exactly once.
//
// # Spool contract
//
// A request is a file <name>.json, <name>.yaml or <name>.yml in the spool
// directory. Hidden files, *.tmp files and pcsync's own outputs
// (*.result.json, *.log, *.cancel) are never read as requests. A request is
// pending while <name>.result.json does not exist. Creating <name>.cancel
// cancels a queued or running run. pcsync never deletes, moves or rewrites a
// request.
//
// # State directory
//
// The daemon keeps its own state in a state directory (default
// <spool>/.pcsync, hidden so that the spool scan never sees it):
//
//	<state>/daemon.lock                 held (flock) by the one daemon serving the spool
//	<state>/runs/<name>/state.json      a started run: phase, pid, process start time, boot id
//	<state>/runs/<name>/stdin           the prompt fed to the agent (0600)
//	<state>/runs/<name>/stdout          the agent's raw stdout (what the parser reads)
//	<state>/runs/<name>/stderr          the agent's raw stderr
//	<state>/runs/<name>/exit.json       the agent's exit status, written by the run shim
//	<state>/runs/<name>/logpos          how much of stdout and stderr is copied into <name>.log
//	<state>/work/<name>/                the run's working directory (kept after the run)
//	<state>/home/<company>/<agent>/     HOME of every run of that agent, so CLI sessions survive for resume
//	<state>/usage/<adapter>/<session>.json  the last cumulative usage seen per session (Codex thread totals)
//
// <state>/runs/<name> is removed once the result is written; work and home
// directories are kept.
package runs
