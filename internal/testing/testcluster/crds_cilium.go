package testcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// CiliumVersion is the Cilium release whose CiliumNetworkPolicy CRD
// InstallCiliumCRD loads: hack/crds/cilium.sh's default CILIUM_VERSION
// (TestCiliumVersionMatchesScript keeps the two equal). The CRD is taken
// from Cilium's own Go module (github.com/cilium/cilium, as the module
// proxy serves it), never copied into this repository.
const CiliumVersion = "v1.20.2"

// CiliumCRDEnv names the environment variable that overrides
// CiliumCRDPath.
const CiliumCRDEnv = "PCSYNC_CILIUM_CRD"

// CiliumCRDName is the name of the CRD InstallCiliumCRD loads.
const CiliumCRDName = "ciliumnetworkpolicies.cilium.io"

// ErrCiliumCRDMissing is wrapped by InstallCiliumCRD when the cached CRD is
// absent.
var ErrCiliumCRDMissing = errors.New("the CiliumNetworkPolicy CRD is not cached: run `bash hack/crds/cilium.sh` (make k8sbin and .ci/run run it)")

// CiliumCRDPath returns $PCSYNC_CILIUM_CRD if set, else
// ${XDG_CACHE_HOME:-$HOME/.cache}/pcsync/crds/cilium-<CiliumVersion>/ciliumnetworkpolicies.yaml,
// the file hack/crds/cilium.sh writes.
func CiliumCRDPath() string {
	if p := os.Getenv(CiliumCRDEnv); p != "" {
		return p
	}
	cache := pcsyncCache()
	return filepath.Join(cache, "crds", "cilium-"+CiliumVersion, "ciliumnetworkpolicies.yaml")
}

// InstallCiliumCRD loads Cilium's CiliumNetworkPolicy CRD (CiliumCRDPath)
// into the cluster and returns once it is Established: from then on the
// API server validates every CiliumNetworkPolicy applied with Cilium's own
// schema (no Cilium agent runs: nothing enforces them). It is idempotent;
// a package whose tests count on the kind not being served must not call
// it (the CRD stays for the cluster's life).
func (c *Cluster) InstallCiliumCRD(ctx context.Context) error {
	path := CiliumCRDPath()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("testcluster: %s: %w", path, ErrCiliumCRDMissing)
	}
	if err != nil {
		return fmt.Errorf("testcluster: Cilium CRD: %w", err)
	}
	if err := c.applyManifests(ctx, string(data)); err != nil {
		return fmt.Errorf("testcluster: Cilium CRD %s: %w", path, err)
	}
	return c.waitCRDs(ctx, CiliumCRDName)
}
