#!/usr/bin/env bash
# Builds the real node's cluster add-ons (internal/testing/testcluster, "Real node"):
#   local-path-provisioner  dynamic volumes (rancher/local-path-provisioner), from the
#                           module ./localpath (its requirements as released, no replaces)
#   coredns                 the cluster DNS (github.com/coredns/coredns as released, with
#                           the plugins the harness's Corefile uses: coredns/main.go), from
#                           the module ./coredns (likewise)
# into a cache directory keyed by their versions:
#
#   ${PCSYNC_ADDONS_BIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pcsync/addons/<key>}
#
# where <key> is local-path-provisioner-<v>_coredns-<v>_r<recipe>_<goos>-<goarch> (see
# versions.env). A complete directory is reused as it is. Progress goes to stderr; the
# only line on stdout is the bin directory. `make k8sbin` runs it after
# hack/kuberouter/build.sh. Each add-on has a module of its own: their client-go
# versions differ from the control plane's and from each other's.
# Environment: PCSYNC_ADDONS_BIN_DIR (output dir), K8SBIN_GO_P (go build -p, default 2).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"

# shellcheck source=../lib/cachebuild.sh
source "$here/../lib/cachebuild.sh"

goos="$(go env GOOS)"
goarch="$(go env GOARCH)"
key="local-path-provisioner-${LOCAL_PATH_VERSION}_coredns-${COREDNS_VERSION}_r${ADDONS_RECIPE}_${goos}-${goarch}"
cache_root="${XDG_CACHE_HOME:-$HOME/.cache}/pcsync/addons"
bin_dir="${PCSYNC_ADDONS_BIN_DIR:-$cache_root/$key}"
binaries=(local-path-provisioner coredns)
log_name=addons

cache_reuse

# check_module MODULE_DIR PATH VERSION: the module requires PATH at VERSION and
# replaces nothing.
check_module() {
	grep -q "^require $2 $3\$" "$here/$1/go.mod" ||
		{ log "hack/addons/$1/go.mod does not require $2 $3 (versions.env)"; exit 1; }
	if grep -q '^replace' "$here/$1/go.mod"; then
		log "hack/addons/$1/go.mod must not replace modules (the add-ons are built as released)"
		exit 1
	fi
}
check_module localpath github.com/rancher/local-path-provisioner "$LOCAL_PATH_VERSION"
check_module coredns github.com/coredns/coredns "$COREDNS_VERSION"

cache_begin

log "building local-path-provisioner ${LOCAL_PATH_VERSION} (-p $p)"
lp_ld="-s -w" # (its version is a constant, 0.0.1: no stamp)
(cd "$here/localpath" && go build -p "$p" -trimpath -ldflags "$lp_ld" -o "$tmp/local-path-provisioner" \
	github.com/rancher/local-path-provisioner)
log "local-path-provisioner done after $((SECONDS - start)) s"

log "building coredns ${COREDNS_VERSION} (-p $p)"
(cd "$here/coredns" && go build -p "$p" -trimpath -ldflags "-s -w" -o "$tmp/coredns" .)
log "coredns done after $((SECONDS - start)) s"

cache_publish
