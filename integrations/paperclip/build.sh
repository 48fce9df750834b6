#!/usr/bin/env bash
# Builds the Paperclip adapter (@pcsync/paperclip-adapter) into a directory
# that Paperclip installs with
#   POST /api/adapters/install {"packageName": "<dir>", "isLocalPath": true}
# and prints that directory's absolute path on stdout (everything else goes
# to stderr). The directory holds package.json, dist/ and the production
# node_modules; it is replaced as a whole on each build.
#
# Environment: PAPERCLIP_ADAPTER_DIR (default <repo>/_out/paperclip-adapter).
# Needs Node >= 24.11 (hack/node/install.sh brings it) and the npm registry
# the first time (npm ci; later builds reuse node_modules while
# package-lock.json is unchanged).
set -euo pipefail

pkg="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$pkg/../.." && pwd)"
out="${PAPERCLIP_ADAPTER_DIR:-$root/_out/paperclip-adapter}"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
PATH="$(bash "$root/hack/node/install.sh"):$PATH"
export PATH

lock_sum="$(sha256sum "$pkg/package-lock.json" | cut -d' ' -f1)"
stamp="$pkg/node_modules/.pcsync-lock-sha256"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$lock_sum" ]]; then
	echo "paperclip-adapter: npm ci in $pkg" >&2
	(cd "$pkg" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2)
	echo "$lock_sum" >"$stamp"
fi

echo "paperclip-adapter: tsc" >&2
rm -rf "$pkg/dist"
(cd "$pkg" && node_modules/.bin/tsc -p tsconfig.json >&2)

mkdir -p "$(dirname "$out")"
tmp="$(mktemp -d "$out.tmp.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
cp "$pkg/package.json" "$pkg/package-lock.json" "$tmp/"
cp -R "$pkg/dist" "$tmp/dist"
if [[ -f "$out/node_modules/.pcsync-lock-sha256" && "$(cat "$out/node_modules/.pcsync-lock-sha256")" == "$lock_sum" ]]; then
	mv "$out/node_modules" "$tmp/node_modules"
else
	echo "paperclip-adapter: production node_modules" >&2
	cp -R "$pkg/node_modules" "$tmp/node_modules"
	(cd "$tmp" && npm prune --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error >&2)
	echo "$lock_sum" >"$tmp/node_modules/.pcsync-lock-sha256"
fi
chmod -R a+rX "$tmp"
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
printf '%s\n' "$out"
