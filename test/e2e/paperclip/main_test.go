//go:build integration

package paperclip

import (
	"os"
	"testing"

	"github.com/pcsync/pcsync/internal/testcluster"
)

// TestMain runs the tests against one control plane (the Kubernetes
// executor's tests), then stops the shared Paperclip server.
func TestMain(m *testing.M) {
	code := testcluster.Main(m)
	for i := len(atExit) - 1; i >= 0; i-- {
		atExit[i]()
	}
	os.Exit(code)
}
