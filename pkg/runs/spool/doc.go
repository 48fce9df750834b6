// Package spool is pcsync's spool server: a Server watches one spool
// directory for run requests (fsnotify, and a periodic rescan for what it
// missed), admits them (reads each request, validates it with
// runs.LoadRequest, adopts it from an earlier daemon or rejects it),
// queues accepted runs per agent (FIFO by request time, at most the agent's
// concurrency at once), hands them to a runs.Executor, acts on cancel files
// and writes each run's <name>.result.json exactly once. One server serves
// a spool at a time: it holds <state>/daemon.lock.
//
// The server keeps <state>/status.json (its heartbeat, the companies it
// serves, the runs it has not finished); ListRuns, ShowRun and Liveness
// read it with the spool's files for `pcsync runs list`, `pcsync runs show`
// and `pcsync doctor`.
//
// Files are split by what they do: server.go (Options, New, Run, the
// lock), prepare.go (the spool made ready at the daemon's start: created
// when missing, refused when unusable), loop.go (the single goroutine that owns every request's entry),
// watch.go and scan.go (finding requests), admit.go (reading, validating,
// adopting, rejecting), queue.go (per-agent FIFO and concurrency),
// cancel.go, finish.go (results), temps.go (what a killed daemon left),
// usage.go (Codex session totals), status.go (the status file) and list.go
// (the listing).
package spool
