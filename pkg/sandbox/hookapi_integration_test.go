//go:build integration

package sandbox_test

import (
	"context"

	"github.com/pcsync/pcsync/pkg/sandbox"
	"github.com/pcsync/pcsync/pkg/sandbox/hookapi"
)

// The integration tests of package sandbox serve the hook API through
// sandbox.ServeAPI.
func init() {
	sandbox.ServeAPI = func(ctx context.Context, m *sandbox.Manager, socket string) error {
		return hookapi.New(m, socket).Serve(ctx)
	}
}
