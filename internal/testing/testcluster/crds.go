package testcluster

import (
	"context"
	"fmt"
)

// ApplyCRD server-side applies the CustomResourceDefinition crd (YAML)
// and returns once the CRD name is Established. It is idempotent; the CRD
// stays for the cluster's life (a package whose tests count on the kind
// not being served must not call it).
func (c *Cluster) ApplyCRD(ctx context.Context, crd []byte, name string) error {
	if err := c.applyManifests(ctx, string(crd)); err != nil {
		return fmt.Errorf("testcluster: CRD %s: %w", name, err)
	}
	return c.waitCRDs(ctx, name)
}
