// Package runs is the run contract that pcsync's spool server and its
// executors share: a Run is an accepted request (ParseRequest, LoadRequest
// validate one against the CUE Run schema and the loaded config); an
// Executor starts and adopts runs and hands back a Handle, whose Wait
// reports the run's Ending; Outcome turns how a process ended and what the
// adapter's parser made of its output into the result, for every executor;
// EnvSpec is the one rule that builds an agent's environment; Paths and
// Classify name the spool's files and Layout the state directory's.
//
// The parts that use it, each in its own package:
//
//	pkg/runs/spool      the spool server: watches the spool directory, admits
//	                    requests, queues them per agent (FIFO, at most the
//	                    agent's concurrency at once), writes each result
//	                    exactly once; the status file and `pcsync runs list`
//	pkg/runs/localexec  the local executor: the agent CLI as a local process
//	                    under a run shim, its output followed into <name>.log
//	pkg/runs/kubeexec   the Kubernetes executor: a Job and a Secret per run
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
// <spool>/.pcsync, hidden so that the spool scan never sees it). The local
// executor keeps a started run's state in <state>/runs/<name> (the files
// below); the Kubernetes executor keeps one journal for all its runs,
// <state>/kubernetes-runs.jsonl, and the sandbox its leases in
// <state>/sandbox-leases.json:
//
//	<state>/daemon.lock                 held (flock) by the one daemon serving the spool
//	<state>/status.json                 the daemon's status file: heartbeat, companies, unfinished runs
//	<state>/runs/<name>/state.json      a started run: phase, pid, process start time, boot id
//	<state>/runs/<name>/stdin           the prompt fed to the agent (0600)
//	<state>/runs/<name>/stdout          the agent's raw stdout (what the parser reads)
//	<state>/runs/<name>/stderr          the agent's raw stderr
//	<state>/runs/<name>/exit.json       the agent's exit status, written by the run shim
//	<state>/runs/<name>/logpos          how much of stdout and stderr is copied into <name>.log, and the log's size then
//	<state>/work/<name>/                the run's working directory (kept after the run)
//	<state>/home/<company>/<agent>/     HOME of every run of that agent, so CLI sessions survive for resume
//	<state>/usage/<adapter>/<session>.json  the last cumulative usage seen per session (Codex thread totals)
//
// <state>/runs/<name> is removed once the result is written; work and home
// directories are kept.
package runs
