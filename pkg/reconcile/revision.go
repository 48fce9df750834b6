package reconcile

import (
	"path/filepath"
	"strings"
)

// DigestPrefix starts the revision of a config directory that is no Git
// checkout git-sync made: a digest of what the loop rendered from it.
const DigestPrefix = "sha256:"

// revision names the config a reconcile loaded from dir (the directory
// the configured path resolves to): the Git commit when a path element
// is named by one (git-sync's worktree, <root>/.worktrees/<hash>; v3's
// rev-<hash>), else DigestPrefix and the first 16 hex digits of digest
// (the render's, "" for none: an invalid config has no revision then).
func revision(dir, digest string) string {
	for d := dir; ; {
		if name := strings.TrimPrefix(filepath.Base(d), "rev-"); isCommit(name) {
			return name
		}
		parent := filepath.Dir(d)
		if parent == d {
			break
		}
		d = parent
	}
	if digest == "" {
		return ""
	}
	return DigestPrefix + digest[:min(16, len(digest))]
}

// isCommit says whether s is a full Git object name: 40 (SHA-1) or 64
// (SHA-256) lowercase hex digits.
func isCommit(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for _, r := range s {
		if (r < '0' || r > '9') && (r < 'a' || r > 'f') {
			return false
		}
	}
	return true
}
