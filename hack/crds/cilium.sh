#!/usr/bin/env bash
# Caches Cilium's CiliumNetworkPolicy CRD for the test control plane
# (internal/testing/testcluster: InstallCiliumCRD loads it, so that the API server
# validates every rendered CiliumNetworkPolicy with Cilium's own schema).
#
# The CRD comes from Cilium's own Go module, as the module proxy serves it
# (`go mod download`), never from a copy in this repository. Idempotent: a
# cached file is kept. Prints the cached file's path.
#
#   CILIUM_VERSION  default: testcluster.CiliumVersion (a test keeps the two equal)
#   PCSYNC_CILIUM_CRD  where the harness reads it instead (not used here)
set -euo pipefail

CILIUM_VERSION="${CILIUM_VERSION:-v1.20.2}"
crd_path="pkg/k8s/apis/cilium.io/client/crds/v2/ciliumnetworkpolicies.yaml"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/pcsync/crds/cilium-${CILIUM_VERSION}"
out="$cache/ciliumnetworkpolicies.yaml"

if [ -s "$out" ]; then
	echo "$out"
	exit 0
fi

# Outside any module, so that the download touches no go.mod.
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
if ! (cd "$tmp" && GOFLAGS=-mod=mod go mod download -json "github.com/cilium/cilium@${CILIUM_VERSION}") >"$tmp/download.json"; then
	cat "$tmp/download.json" >&2
	echo "hack/crds/cilium.sh: go mod download github.com/cilium/cilium@${CILIUM_VERSION} failed" >&2
	exit 1
fi
dir="$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' "$tmp/download.json")"
if [ -z "$dir" ] || [ ! -s "$dir/$crd_path" ]; then
	echo "hack/crds/cilium.sh: github.com/cilium/cilium@${CILIUM_VERSION} has no $crd_path (module dir: '${dir}')" >&2
	exit 1
fi
mkdir -p "$cache"
cp "$dir/$crd_path" "$tmp/crd.yaml"
chmod 0644 "$tmp/crd.yaml"
mv "$tmp/crd.yaml" "$out"
echo "$out"
