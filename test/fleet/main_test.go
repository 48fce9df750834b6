//go:build integration

package fleet

import (
	"flag"
	"os"
	"testing"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
)

// TestMain starts the test control plane only for the benchmarks: the
// package has no test, and `make test` should not pay for a cluster here.
func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		os.Exit(m.Run())
	}
	os.Exit(testcluster.Main(m))
}
