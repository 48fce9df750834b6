package testcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// Versions of the real node's cluster add-ons. They must equal
// hack/addons/versions.env (TestAddonVersionsMatchBuildScript checks it); their
// directory is keyed by them, so a change makes `make k8sbin` build a new set.
const (
	// LocalPathVersion is the version of rancher/local-path-provisioner, the real
	// node's dynamic volume provisioner (the only version the Go module proxy
	// serves).
	LocalPathVersion = "v0.0.30"
	// CoreDNSVersion is the version of CoreDNS, the real node's cluster DNS
	// (as released, with the plugins its Corefile uses: hack/addons/coredns/main.go).
	CoreDNSVersion = "v1.15.0"
	// AddonBuildRecipe is bumped when hack/addons/build.sh changes how they are
	// built or which.
	AddonBuildRecipe = "2"
)

// AddonBinDirEnv names the environment variable that overrides the directory of
// the add-ons' binaries.
const AddonBinDirEnv = "PCSYNC_ADDONS_BIN_DIR"

// AddonBinaries lists the executables the real node needs in its add-on
// directory.
var AddonBinaries = []string{"local-path-provisioner", "coredns"}

// AddonVersionKey names one set of add-on binaries; it is the last element of
// DefaultAddonBinDir.
func AddonVersionKey() string {
	return fmt.Sprintf("local-path-provisioner-%s_coredns-%s_r%s_%s-%s", LocalPathVersion, CoreDNSVersion,
		AddonBuildRecipe, runtime.GOOS, runtime.GOARCH)
}

// DefaultAddonBinDir returns $PCSYNC_ADDONS_BIN_DIR if set, else
// ${XDG_CACHE_HOME:-$HOME/.cache}/pcsync/addons/<AddonVersionKey()>, the
// directory hack/addons/build.sh fills (`make k8sbin` runs it).
func DefaultAddonBinDir() string {
	if d := os.Getenv(AddonBinDirEnv); d != "" {
		return d
	}
	return filepath.Join(pcsyncCache(), "addons", AddonVersionKey())
}

// checkAddonBinaries reports, wrapping ErrBinariesMissing, which of
// AddonBinaries dir lacks.
func checkAddonBinaries(dir string) error {
	if missing := missingExecutables(dir, AddonBinaries); len(missing) > 0 {
		return fmt.Errorf("real node: %v not found in %s (`make k8sbin` or `bash hack/addons/build.sh` builds them): %w",
			missing, dir, ErrBinariesMissing)
	}
	return nil
}
