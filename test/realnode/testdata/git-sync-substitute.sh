#!/bin/sh
# A substitute for git-sync (k8s.io/git-sync v4), whose Go module the Go module
# proxy does not serve, so that it cannot be built here. It is Debian's git,
# which git-sync itself drives, following the part of git-sync v4's contract
# that deploy/base uses:
#   GITSYNC_REPO    the repository to clone (required)
#   GITSYNC_REF     the branch, tag or commit to follow (default HEAD)
#   GITSYNC_ROOT    the directory it owns (required)
#   GITSYNC_LINK    the symlink under the root that points at the current
#                   checkout (default: the repository's last path element)
#   GITSYNC_PERIOD  how long to wait between fetches, in seconds with an s
#                   suffix (default 10s)
# Each checkout is a worktree under $GITSYNC_ROOT/.worktrees/<hash>; the link
# is swapped atomically (a new symlink renamed over the old), and the old
# worktree removed after, as git-sync does. It logs one JSON line per sync.
set -u
: "${GITSYNC_REPO:?GITSYNC_REPO is required}" "${GITSYNC_ROOT:?GITSYNC_ROOT is required}"
ref=${GITSYNC_REF:-HEAD}
root=$GITSYNC_ROOT
link=${GITSYNC_LINK:-$(basename "$GITSYNC_REPO" .git)}
period=${GITSYNC_PERIOD:-10s}
period=${period%s}
export HOME=/tmp GIT_TERMINAL_PROMPT=0
repo=$root/.repo
git() { command git -c safe.directory='*' --git-dir="$repo" "$@"; }
log() { printf '{"ts":"%s","msg":"%s"%s}\n' "$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)" "$1" "${2:-}"; }

[ -d "$repo" ] || command git init -q --bare "$repo" || exit 1
current=$(readlink "$root/$link" 2>/dev/null || true)
while :; do
	if ! out=$(git fetch -q --depth 1 --no-tags "$GITSYNC_REPO" "$ref" 2>&1); then
		log "fetch failed" ",\"repo\":\"$GITSYNC_REPO\",\"error\":\"$(printf %s "$out" | tr '\n"' ' _')\""
	else
		hash=$(git rev-parse FETCH_HEAD)
		if [ ".worktrees/$hash" != "$current" ]; then
			if git worktree add -q --detach -f "$root/.worktrees/$hash" "$hash" >/dev/null 2>&1 &&
				ln -sfn ".worktrees/$hash" "$root/.$link.tmp" && mv -T "$root/.$link.tmp" "$root/$link"; then
				[ -n "$current" ] && git worktree remove -f "$root/$current" >/dev/null 2>&1
				git worktree prune
				current=.worktrees/$hash
				log "updated successfully" ",\"ref\":\"$ref\",\"hash\":\"$hash\""
			else
				log "checkout failed" ",\"hash\":\"$hash\""
			fi
		fi
	fi
	sleep "$period"
done
