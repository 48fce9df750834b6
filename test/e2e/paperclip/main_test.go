//go:build integration

package paperclip

import (
	"os"
	"testing"

	"github.com/pcsync/pcsync/internal/testcluster"
)

// TestMain runs the tests against one control plane (the Kubernetes
// executor's tests) with a real node beside its kwok node (realnode_test.go),
// then stops the shared Paperclip server.
func TestMain(m *testing.M) {
	code := testcluster.MainWith(m, func(o *testcluster.Options) {
		o.RealNode = &testcluster.RealNodeOptions{}
	})
	for i := len(atExit) - 1; i >= 0; i-- {
		atExit[i]()
	}
	os.Exit(code)
}
