#!/usr/bin/env bash
# Builds the real node's network programs (internal/testing/testcluster, "Real node"):
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

# shellcheck source=../lib/cachebuild.sh
source "$here/../lib/cachebuild.sh"

goos="$(go env GOOS)"
goarch="$(go env GOARCH)"
key="kube-router-${KUBE_ROUTER_VERSION}_kube-proxy-${K8S_VERSION}_r${NODENET_RECIPE}_${goos}-${goarch}"
cache_root="${XDG_CACHE_HOME:-$HOME/.cache}/pcsync/nodenet"
bin_dir="${PCSYNC_NODENET_BIN_DIR:-$cache_root/$key}"
binaries=(kube-router kube-proxy)
log_name=nodenet

cache_reuse

grep -q "github.com/cloudnativelabs/kube-router/v2 ${KUBE_ROUTER_VERSION}\$" "$here/go.mod" ||
	{ log "hack/kuberouter/go.mod does not require kube-router ${KUBE_ROUTER_VERSION} (versions.env)"; exit 1; }
if grep -q '^replace' "$here/go.mod"; then
	log "hack/kuberouter/go.mod must not replace modules (kube-router is built as released)"
	exit 1
fi

cache_begin

log "building kube-router ${KUBE_ROUTER_VERSION} (-p $p)"
kr_ld="-s -w -X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=${KUBE_ROUTER_VERSION}"
(cd "$here" && go build -p "$p" -trimpath -ldflags "$kr_ld" -o "$tmp/kube-router" \
	github.com/cloudnativelabs/kube-router/v2/cmd/kube-router)
log "kube-router done after $((SECONDS - start)) s"

# The same flags as hack/k8sbin/build.sh (k8s_ldflags), so that the compiled packages it
# shares with the kubelet come from the build cache.
log "building kube-proxy ${K8S_VERSION} (-p $p)"
(cd "$k8sbin" && go build -p "$p" -trimpath -ldflags "$(k8s_ldflags)" -o "$tmp/kube-proxy" ./cmd/kube-proxy)
log "kube-proxy done after $((SECONDS - start)) s"

cache_publish
