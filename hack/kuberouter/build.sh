#!/usr/bin/env bash
# Builds the real node's network programs (internal/testcluster, "Real node"):
#   kube-router  the NetworkPolicy enforcer (only its firewall controller runs), from
#                this directory's module (hack/kuberouter/go.mod: kube-router v2.1.0,
#                client-go 0.29, no replaces)
#   kube-proxy   iptables mode, so that ClusterIP Services route from the node's pods;
#                from hack/k8sbin's module at the control plane's version
# into a cache directory keyed by their versions:
#
#   ${PCSYNC_NODENET_BIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pcsync/nodenet/<key>}
#
# where <key> is kube-router-<v>_kube-proxy-<v>_r<recipe>_<goos>-<goarch> (see
# versions.env). A complete directory is reused as it is. Progress goes to stderr; the
# only line on stdout is the bin directory. `make k8sbin` runs it after
# hack/k8sbin/build.sh (kube-proxy then shares most compiled packages with the kubelet:
# about a minute; kube-router from a cold build cache: a few minutes on 2 cores).
# Environment: PCSYNC_NODENET_BIN_DIR (output dir), K8SBIN_GO_P (go build -p, default 2).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
k8sbin="$(cd "$here/../k8sbin" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"
# shellcheck source=../k8sbin/versions.env
source "$k8sbin/versions.env"

goos="$(go env GOOS)"
goarch="$(go env GOARCH)"
key="kube-router-${KUBE_ROUTER_VERSION}_kube-proxy-${K8S_VERSION}_r${NODENET_RECIPE}_${goos}-${goarch}"
cache_root="${XDG_CACHE_HOME:-$HOME/.cache}/pcsync/nodenet"
bin_dir="${PCSYNC_NODENET_BIN_DIR:-$cache_root/$key}"
stamp="$bin_dir/.complete"
binaries=(kube-router kube-proxy)

log() { printf 'nodenet: %s\n' "$*" >&2; }

complete() {
	[[ -f "$stamp" ]] && [[ "$(cat "$stamp")" == "$key" ]] || return 1
	local b
	for b in "${binaries[@]}"; do [[ -x "$bin_dir/$b" ]] || return 1; done
}

if complete; then
	printf '%s\n' "$bin_dir"
	exit 0
fi

grep -q "github.com/cloudnativelabs/kube-router/v2 ${KUBE_ROUTER_VERSION}\$" "$here/go.mod" ||
	{ log "hack/kuberouter/go.mod does not require kube-router ${KUBE_ROUTER_VERSION} (versions.env)"; exit 1; }
if grep -q '^replace' "$here/go.mod"; then
	log "hack/kuberouter/go.mod must not replace modules (kube-router is built as released)"
	exit 1
fi

mkdir -p "$(dirname "$bin_dir")"
exec 9>"$bin_dir.lock"
if command -v flock >/dev/null 2>&1; then
	log "waiting for the build lock $bin_dir.lock"
	flock 9
fi
if complete; then
	printf '%s\n' "$bin_dir"
	exit 0
fi

tmp="$(mktemp -d "$bin_dir.tmp.XXXXXX")"
chmod 755 "$tmp"
trap 'rm -rf "$tmp"' EXIT

export GOWORK=off CGO_ENABLED=0 GOFLAGS=-buildvcs=false
p="${K8SBIN_GO_P:-2}"
start=$SECONDS

log "building kube-router ${KUBE_ROUTER_VERSION} (-p $p)"
kr_ld="-s -w -X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=${KUBE_ROUTER_VERSION}"
(cd "$here" && go build -p "$p" -trimpath -ldflags "$kr_ld" -o "$tmp/kube-router" \
	github.com/cloudnativelabs/kube-router/v2/cmd/kube-router)
log "kube-router done after $((SECONDS - start)) s"

# The same flags as hack/k8sbin/build.sh, so that the compiled packages it shares with
# the kubelet come from the build cache.
minor="${K8S_VERSION#v*.}"
minor="${minor%%.*}"
major="${K8S_VERSION#v}"
major="${major%%.*}"
ld="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ld+=" -X $pkg.gitVersion=${K8S_VERSION}"
	ld+=" -X $pkg.gitMajor=${major}"
	ld+=" -X $pkg.gitMinor=${minor}"
	ld+=" -X $pkg.gitTreeState=clean"
	ld+=" -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
log "building kube-proxy ${K8S_VERSION} (-p $p)"
(cd "$k8sbin" && go build -p "$p" -trimpath -ldflags "$ld" -o "$tmp/kube-proxy" ./cmd/kube-proxy)
log "kube-proxy done after $((SECONDS - start)) s"

for b in "${binaries[@]}"; do
	[[ -x "$tmp/$b" ]] || { log "missing $b after the build"; exit 1; }
done
printf '%s\n' "$key" >"$tmp/.complete"
if [[ -e "$bin_dir" ]]; then
	rm -rf "$bin_dir.old"
	mv "$bin_dir" "$bin_dir.old"
	rm -rf "$bin_dir.old"
fi
mv "$tmp" "$bin_dir"
trap - EXIT
log "built in $((SECONDS - start)) s into $bin_dir"
printf '%s\n' "$bin_dir"
