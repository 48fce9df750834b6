package testcluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// Versions of the control-plane binaries. They must equal hack/k8sbin/versions.env
// (TestVersionsMatchBuildScript checks it); the default binary directory is keyed by
// them, so a version change makes `make k8sbin` build a new set.
const (
	// KubernetesVersion is the version of kube-apiserver, kube-controller-manager,
	// kube-scheduler and the real node's kubelet.
	KubernetesVersion = "v1.34.4"
	// EtcdVersion is the version of etcd.
	EtcdVersion = "v3.6.8"
	// KwokVersion is the version of kwok, which plays the node.
	KwokVersion = "v0.7.0"
	// BuildRecipe is bumped when hack/k8sbin/build.sh changes how binaries are built
	// or which (2: kubelet added).
	BuildRecipe = "2"
)

// BinDirEnv names the environment variable that overrides the binary directory.
const BinDirEnv = "PCSYNC_K8S_BIN_DIR"

// Binaries lists the executables a cluster needs in its binary directory.
var Binaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}

// VersionKey names one set of binaries; it is the last element of DefaultBinDir.
func VersionKey() string {
	return fmt.Sprintf("k8s-%s_etcd-%s_kwok-%s_r%s_%s-%s", KubernetesVersion, EtcdVersion, KwokVersion,
		BuildRecipe, runtime.GOOS, runtime.GOARCH)
}

// DefaultBinDir returns $PCSYNC_K8S_BIN_DIR if set, else
// ${XDG_CACHE_HOME:-$HOME/.cache}/pcsync/k8sbin/<VersionKey()>, the directory
// hack/k8sbin/build.sh fills.
func DefaultBinDir() string {
	if d := os.Getenv(BinDirEnv); d != "" {
		return d
	}
	cache := pcsyncCache()
	return filepath.Join(cache, "k8sbin", VersionKey())
}

// ErrBinariesMissing is wrapped by CheckBinaries when a binary is absent.
var ErrBinariesMissing = errors.New("control-plane binaries missing: run `make k8sbin` (or `bash hack/k8sbin/build.sh`) to build them")

// CheckBinaries reports, wrapping ErrBinariesMissing, which of Binaries dir lacks.
func CheckBinaries(dir string) error {
	if missing := missingExecutables(dir, Binaries); len(missing) > 0 {
		return fmt.Errorf("testcluster: %v not found in %s: %w", missing, dir, ErrBinariesMissing)
	}
	return nil
}

// missingExecutables returns which of names dir lacks as executable files.
func missingExecutables(dir string, names []string) []string {
	var missing []string
	for _, b := range names {
		st, err := os.Stat(filepath.Join(dir, b))
		if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			missing = append(missing, b)
		}
	}
	return missing
}

// pcsyncCache is ${XDG_CACHE_HOME:-$HOME/.cache}/pcsync, where the harness's
// binaries, images and downloads are kept between runs.
func pcsyncCache() string {
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = os.TempDir()
		}
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "pcsync")
}
