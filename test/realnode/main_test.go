//go:build integration

package realnode

import (
	"os"
	"testing"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
)

func TestMain(m *testing.M) {
	if os.Getenv(poolDaemonConfig) != "" {
		os.Exit(runPoolDaemon())
	}
	os.Exit(testcluster.MainWith(m, func(o *testcluster.Options) {
		o.RealNode = &testcluster.RealNodeOptions{NetworkPolicy: true}
	}))
}
