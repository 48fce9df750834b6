//go:build integration

package testcluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
)

// panicHelperEnv makes this test binary, re-executed by TestNoProcessLeftBehind,
// start a second cluster, print its PIDs and panic without calling Close.
const panicHelperEnv = "PCSYNC_TESTCLUSTER_PANIC_HELPER"

func TestMain(m *testing.M) {
	if dir := os.Getenv(panicHelperEnv); dir != "" {
		panicHelper(dir)
	}
	os.Exit(testcluster.Main(m))
}

func panicHelper(workDir string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	opts := testcluster.DefaultOptions()
	opts.WorkDir = workDir
	c, err := testcluster.Start(ctx, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	b, _ := json.Marshal(c.PIDs())
	fmt.Printf("PIDS %s\n", b)
	panic("panic helper: dying without Close")
}
