#!/usr/bin/env bash
# Builds the binaries of pcsync's local test control plane — kube-apiserver,
# kube-controller-manager, kube-scheduler, the real node's kubelet (k8s.io/kubernetes),
# etcd and kwok — from the Go module proxy, into a cache directory keyed by their versions:
#
#   ${PCSYNC_K8S_BIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pcsync/k8sbin/<key>}
#
# where <key> is k8s-<v>_etcd-<v>_kwok-<v>_r<recipe>_<goos>-<goarch> (see versions.env).
# A complete directory is reused as it is, so a second call costs nothing. Progress goes
# to stderr; the only line on stdout is the bin directory.
#
# Needs only the Go toolchain and the module proxy. Cold: ~10 min and ~2 GB RAM on 2 cores.
# Environment: PCSYNC_K8S_BIN_DIR (output dir), K8SBIN_GO_P (go build -p, default 2).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"

# shellcheck source=../lib/cachebuild.sh
source "$here/../lib/cachebuild.sh"

goos="$(go env GOOS)"
goarch="$(go env GOARCH)"
key="k8s-${K8S_VERSION}_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}_r${RECIPE}_${goos}-${goarch}"
cache_root="${XDG_CACHE_HOME:-$HOME/.cache}/pcsync/k8sbin"
bin_dir="${PCSYNC_K8S_BIN_DIR:-$cache_root/$key}"
binaries=(kube-apiserver kube-controller-manager kube-scheduler kubelet etcd kwok)
log_name=k8sbin

cache_reuse

# The go.mod files must name the versions that the cache key claims.
grep -q "k8s.io/kubernetes ${K8S_VERSION}\$" "$here/go.mod" ||
	{ log "hack/k8sbin/go.mod does not require k8s.io/kubernetes ${K8S_VERSION} (versions.env)"; exit 1; }
grep -q "=> k8s.io/api ${K8S_STAGING_VERSION}\$" "$here/go.mod" ||
	{ log "hack/k8sbin/go.mod does not replace staging modules with ${K8S_STAGING_VERSION}"; exit 1; }
grep -q "go.etcd.io/etcd/server/v3 ${ETCD_VERSION}\$" "$here/etcd/go.mod" ||
	{ log "hack/k8sbin/etcd/go.mod does not require etcd ${ETCD_VERSION} (versions.env)"; exit 1; }

cache_begin

log "building kube-apiserver, kube-controller-manager, kube-scheduler, kubelet ${K8S_VERSION} (one go build, -p $p)"
(cd "$here" && go build -p "$p" -trimpath -ldflags "$(k8s_ldflags)" -o "$tmp/" \
	./cmd/kube-apiserver ./cmd/kube-controller-manager ./cmd/kube-scheduler ./cmd/kubelet)
log "kube binaries done after $((SECONDS - start)) s"

log "building etcd ${ETCD_VERSION}"
(cd "$here/etcd" && go build -p "$p" -trimpath -ldflags "-s -w" -o "$tmp/etcd" .)
log "etcd done after $((SECONDS - start)) s"

log "building kwok ${KWOK_VERSION}"
GOBIN="$tmp" go install -p "$p" -trimpath \
	-ldflags "-s -w" \
	"sigs.k8s.io/kwok/cmd/kwok@${KWOK_VERSION}"
log "kwok done after $((SECONDS - start)) s"

cache_publish
