package spool

import (
	"log/slog"
	"path/filepath"

	"github.com/pcsync/pcsync/internal/lib/safefile"
	"github.com/pcsync/pcsync/pkg/result"
)

// removeStaleTemps removes the temp files that a daemon stopped by SIGKILL
// (or a power loss) left behind: a result writer's in the spool (a result
// already linked into place keeps its content under its own name, now with
// one link again) and the state files' (status, run state, markers, usage
// totals) in the state directory. Run calls it holding the daemon lock, so
// no other pcsync writer is at work. The agents' working directories are
// not looked at, nor anything a spool writer left (only names of the
// result writer's pattern are). Failures are logged: a temp file left is
// harmless.
func removeStaleTemps(log *slog.Logger, spool, stateDir string) {
	type place struct{ dir, suffix string }
	places := []place{{spool, result.Suffix}, {stateDir, ""}}
	for _, sub := range []string{"runs", "usage"} {
		dirs, _ := filepath.Glob(filepath.Join(stateDir, sub, "*"))
		for _, d := range dirs {
			places = append(places, place{d, ""})
		}
	}
	for _, p := range places {
		removed, err := safefile.RemoveTemps(p.dir, p.suffix)
		for _, path := range removed {
			log.Info("removed a temp file an earlier daemon left", slog.String("file", path))
		}
		if err != nil {
			log.Warn("cannot remove the temp files an earlier daemon left", slog.Any("error", err))
		}
	}
}
