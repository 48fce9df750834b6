//go:build integration

package paperclip

import (
	"os"
	"testing"
	"time"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
)

// TestMain runs the tests against one control plane (the Kubernetes
// executor's tests) with a real node beside its kwok node (realnode_test.go),
// then stops the shared Paperclip server. The real node starts with the
// first test that needs it (Lazy): the machine has one, and make test runs
// this package beside test/realnode, which holds it for minutes.
func TestMain(m *testing.M) {
	code := testcluster.MainWith(m, func(o *testcluster.Options) {
		o.RealNode = &testcluster.RealNodeOptions{Lazy: true, LockTimeout: 40 * time.Minute}
	})
	for i := len(atExit) - 1; i >= 0; i-- {
		atExit[i]()
	}
	os.Exit(code)
}
