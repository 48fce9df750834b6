#!/usr/bin/env bash
# Builds the GitHub CLI gh (GH_VERSION, versions.env) from its Go module, as
# released, into a cache directory keyed by its version:
#
#   ${PCSYNC_GH_BIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pcsync/tools/<key>}
#
# `go install …@<version>` asks the module proxy's list endpoint, which
# fails for this module; the build runs in a throwaway module that requires
# github.com/cli/cli/v2 at the version instead (its go.mod decides the
# dependencies). A complete directory is reused as it is. Progress goes to
# stderr; the only line on stdout is the bin directory, which holds gh.
# make gh runs it (make test needs it); the tests of
# pkg/egressproxy/ghsocket and test/realnode run it too. About 4 minutes on
# 2 cores cold. Environment: PCSYNC_GH_BIN_DIR (output dir), K8SBIN_GO_P
# (go build -p, default 2).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"
# shellcheck source=../lib/cachebuild.sh
source "$here/../lib/cachebuild.sh"

key="gh-${GH_VERSION}_r${GH_RECIPE}_$(go env GOOS)-$(go env GOARCH)"
bin_dir="${PCSYNC_GH_BIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pcsync/tools/$key}"
binaries=(gh)
log_name=gh

cache_reuse
cache_begin
log "building gh ${GH_VERSION} (-p $p)"
mod="$(mktemp -d)"
trap 'rm -rf "$tmp" "$mod"' EXIT
# The version stamp is the one gh's own build sets.
(cd "$mod" && go mod init pcsync.invalid/gh >/dev/null 2>&1 &&
	GOFLAGS=-mod=mod go get "github.com/cli/cli/v2/cmd/gh@${GH_VERSION}" >&2 &&
	go build -p "$p" -trimpath -o "$tmp/gh" \
		-ldflags "-s -w -X github.com/cli/cli/v2/internal/build.Version=${GH_VERSION#v}" \
		github.com/cli/cli/v2/cmd/gh)
rm -rf "$mod"
cache_publish
