//go:build integration

package realnode

import (
	"os"
	"testing"

	"github.com/pcsync/pcsync/internal/testcluster"
)

func TestMain(m *testing.M) {
	os.Exit(testcluster.MainWith(m, func(o *testcluster.Options) {
		o.RealNode = &testcluster.RealNodeOptions{}
	}))
}
