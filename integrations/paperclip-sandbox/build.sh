#!/usr/bin/env bash
# Builds pcsync's Paperclip sandbox-provider plugin (@pcsync/paperclip-sandbox)
# into a directory that Paperclip installs with
#   POST /api/plugins/install {"packageName": "<dir>", "isLocalPath": true}
# and prints that directory's absolute path as the last line on stdout
# (everything else goes to stderr). The plugin is plain ESM, no compile step:
# the directory holds package.json, dist/ (src/ as it is) and the production
# node_modules (@paperclipai/plugin-sdk); it is replaced as a whole.
#
# Environment: PAPERCLIP_PLUGIN_DIR (default <repo>/_out/paperclip-plugin).
# Needs Node >= 24.11 (hack/node/install.sh brings it) and the npm registry
# the first time (npm ci; later builds reuse node_modules while
# package-lock.json is unchanged).
set -euo pipefail

pkg="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$pkg/../.." && pwd)"
out="${PAPERCLIP_PLUGIN_DIR:-$root/_out/paperclip-plugin}"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
PATH="$(bash "$root/hack/node/install.sh"):$PATH"
export PATH

lock_sum="$(sha256sum "$pkg/package-lock.json" | cut -d' ' -f1)"
stamp="$pkg/node_modules/.pcsync-lock-sha256"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$lock_sum" ]]; then
	echo "paperclip-plugin: npm ci in $pkg" >&2
	(cd "$pkg" && npm ci --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error >&2)
	echo "$lock_sum" >"$stamp"
fi

mkdir -p "$(dirname "$out")"
tmp="$(mktemp -d "$out.tmp.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
cp "$pkg/package.json" "$pkg/package-lock.json" "$tmp/"
cp -R "$pkg/src" "$tmp/dist"
cp -R "$pkg/node_modules" "$tmp/node_modules"
chmod -R a+rX "$tmp"
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
printf '%s\n' "$out"
