# shellcheck shell=bash
# cachebuild.sh: what hack/k8sbin/build.sh and hack/kuberouter/build.sh share, sourced
# by both: a cache directory of binaries keyed by their versions, reused when complete,
# built by one process at a time (flock on <dir>.lock) into a temporary directory that
# replaces it once whole; and the version flags of a k8s.io/kubernetes build.
#
# Before sourcing, a script sets:
#   log_name  the prefix of its progress lines on stderr
#   bin_dir   the cache directory
#   key       its cache key, written into <bin_dir>/.complete
#   binaries  the executables a complete directory holds (an array)
# Its only line on stdout is then the bin directory.

log() { printf '%s: %s\n' "$log_name" "$*" >&2; }

# cache_complete says whether bin_dir holds a complete build of key.
cache_complete() {
	[[ -f "$bin_dir/.complete" ]] && [[ "$(cat "$bin_dir/.complete")" == "$key" ]] || return 1
	local b
	for b in "${binaries[@]}"; do [[ -x "$bin_dir/$b" ]] || return 1; done
}

# cache_reuse prints bin_dir and exits when it is complete.
cache_reuse() {
	if cache_complete; then
		printf '%s\n' "$bin_dir"
		exit 0
	fi
}

# cache_begin waits for the build lock of bin_dir (concurrent make/CI/test invocations
# wait), reuses what another build made meanwhile, else makes the temporary directory
# $tmp (removed on exit unless cache_publish moves it into place) and sets the build's
# Go environment: $p is go build's -p (K8SBIN_GO_P, default 2), $start the start time.
cache_begin() {
	mkdir -p "$(dirname "$bin_dir")"
	exec 9>"$bin_dir.lock"
	if command -v flock >/dev/null 2>&1; then
		log "waiting for the build lock $bin_dir.lock"
		flock 9
	fi
	cache_reuse
	tmp="$(mktemp -d "$bin_dir.tmp.XXXXXX")"
	chmod 755 "$tmp"
	trap 'rm -rf "$tmp"' EXIT
	export GOWORK=off CGO_ENABLED=0 GOFLAGS=-buildvcs=false
	p="${K8SBIN_GO_P:-2}"
	start=$SECONDS
}

# cache_publish checks that $tmp holds every binary, stamps it with key and moves it
# into bin_dir (an incomplete previous directory moved aside first), then prints
# bin_dir.
cache_publish() {
	local b
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
}

# k8s_ldflags prints the -ldflags of a k8s.io/kubernetes binary at K8S_VERSION: version
# stamps, so that it reports its real version instead of v0.0.0. Every build of the
# module uses the same flags, so that the packages they share come from the build cache.
k8s_ldflags() {
	local minor major pkg ld="-s -w"
	minor="${K8S_VERSION#v*.}"
	minor="${minor%%.*}"
	major="${K8S_VERSION#v}"
	major="${major%%.*}"
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ld+=" -X $pkg.gitVersion=${K8S_VERSION}"
		ld+=" -X $pkg.gitMajor=${major}"
		ld+=" -X $pkg.gitMinor=${minor}"
		ld+=" -X $pkg.gitTreeState=clean"
		ld+=" -X $pkg.buildDate=1970-01-01T00:00:00Z"
	done
	printf '%s\n' "$ld"
}
