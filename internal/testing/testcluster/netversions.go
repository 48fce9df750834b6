package testcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// Versions of the real node's network programs. They must equal
// hack/kuberouter/versions.env (TestNetVersionsMatchBuildScript checks it); their
// directory is keyed by them, so a change makes `make k8sbin` build a new set.
const (
	// KubeRouterVersion is the version of kube-router, whose firewall controller
	// enforces NetworkPolicies on the real node (RealNodeOptions.NetworkPolicy). It is
	// the only version the Go module proxy serves; the two advisories against it are
	// in its router (GoBGP) and service proxy, which the node never runs.
	KubeRouterVersion = "v2.1.0"
	// NetBuildRecipe is bumped when hack/kuberouter/build.sh changes how they are built.
	NetBuildRecipe = "1"
)

// NetBinDirEnv names the environment variable that overrides the directory of
// kube-router and kube-proxy.
const NetBinDirEnv = "PCSYNC_NODENET_BIN_DIR"

// NetBinaries lists the executables the real node needs in its network binary
// directory: kube-proxy always (ClusterIP Services), kube-router with NetworkPolicy.
var NetBinaries = []string{"kube-proxy", "kube-router"}

// NetVersionKey names one set of network binaries; it is the last element of
// DefaultNetBinDir. kube-proxy is built at KubernetesVersion.
func NetVersionKey() string {
	return fmt.Sprintf("kube-router-%s_kube-proxy-%s_r%s_%s-%s", KubeRouterVersion, KubernetesVersion,
		NetBuildRecipe, runtime.GOOS, runtime.GOARCH)
}

// DefaultNetBinDir returns $PCSYNC_NODENET_BIN_DIR if set, else
// ${XDG_CACHE_HOME:-$HOME/.cache}/pcsync/nodenet/<NetVersionKey()>, the directory
// hack/kuberouter/build.sh fills (`make k8sbin` runs it).
func DefaultNetBinDir() string {
	if d := os.Getenv(NetBinDirEnv); d != "" {
		return d
	}
	cache := pcsyncCache()
	return filepath.Join(cache, "nodenet", NetVersionKey())
}

// checkNetBinaries reports, wrapping ErrBinariesMissing, which of NetBinaries dir lacks.
func checkNetBinaries(dir string) error {
	if missing := missingExecutables(dir, NetBinaries); len(missing) > 0 {
		return fmt.Errorf("real node: %v not found in %s (`make k8sbin` or `bash hack/kuberouter/build.sh` builds them): %w",
			missing, dir, ErrBinariesMissing)
	}
	return nil
}
