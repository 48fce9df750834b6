//go:build integration

package apply_test

import (
	"os"
	"testing"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
)

// Every test binary of this package runs one real control plane (see
// internal/testing/testcluster); unit tests run alongside the integration tests.
func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }
