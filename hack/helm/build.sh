#!/usr/bin/env bash
# Builds helm (HELM_VERSION, versions.env) from its Go module, as released
# (go install helm.sh/helm/v3/cmd/helm@<version>: its own go.mod, which pins
# a newer client-go than pcsync's), into a cache directory keyed by its
# version:
#
#   ${PCSYNC_HELM_BIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pcsync/helm/<key>}
#
# A complete directory is reused as it is. Progress goes to stderr; the only
# line on stdout is the bin directory, which holds helm. `make helm` runs it
# (make test and make release need it); test/deploy's chart tests run it
# too, so that they find the same binary. About 3 minutes on 2 cores cold.
# Environment: PCSYNC_HELM_BIN_DIR (output dir), K8SBIN_GO_P (go build -p,
# default 2).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"
# shellcheck source=../lib/cachebuild.sh
source "$here/../lib/cachebuild.sh"

key="helm-${HELM_VERSION}_r${HELM_RECIPE}_$(go env GOOS)-$(go env GOARCH)"
bin_dir="${PCSYNC_HELM_BIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pcsync/helm/$key}"
binaries=(helm)
log_name=helm

cache_reuse
cache_begin
log "building helm ${HELM_VERSION} (-p $p)"
# Outside any module, so that helm's own go.mod decides its dependencies;
# the version stamp is the one helm's Makefile sets.
(cd "$tmp" && GOBIN="$tmp" go install -p "$p" -trimpath \
	-ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=${HELM_VERSION}" \
	"helm.sh/helm/v3/cmd/helm@${HELM_VERSION}")
cache_publish
