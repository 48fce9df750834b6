//go:build integration

package paperclip

import (
	"context"
	"sync"
	"testing"

	"github.com/pcsync/pcsync/internal/testing/paperclipserver"
)

// server is a real Paperclip server (internal/testing/paperclipserver: paperclipai
// from npm with its embedded Postgres, in local_trusted mode on loopback,
// its data in a directory of its own and on ports of its own, so that two
// instances never share a database), with the tests' API client.
type server struct {
	*paperclipserver.Server
	tl  tools
	API *api

	pluginOnce sync.Once
	pluginErr  error
	// localOnce installs the benchmarks' local-process provider once.
	localOnce sync.Once
	localErr  error
}

// startServer starts a server whose data directory is the test's (kept
// with PCSYNC_E2E_KEEP when the test fails); it is stopped when the test
// ends.
func startServer(t testing.TB, tl tools) *server {
	t.Helper()
	return newServer(t, tl, true)
}

// newServer is startServer; with cleanup false the server has a data
// directory of its own and the caller stops it (the shared one, after every
// test).
func newServer(t testing.TB, tl tools, cleanup bool) *server {
	t.Helper()
	opts := paperclipserver.Options{Install: tl.Install, NodeBin: tl.NodeBin}
	if cleanup {
		opts.Dir = worldDir(t, "paperclip-e2e-")
	}
	ps, err := paperclipserver.Start(context.Background(), opts)
	if err != nil {
		t.Fatalf("Paperclip server: %v", err)
	}
	s := &server{Server: ps, tl: tl, API: &api{srv: ps}}
	if cleanup {
		t.Cleanup(func() {
			s.Stop()
			if t.Failed() {
				t.Logf("Paperclip server output (tail):\n%s", tail(s.Output(), 8000))
			}
		})
	}
	return s
}

// restart starts the server again on the same data and ports after Halt
// (`paperclipai run`).
func (s *server) restart(t testing.TB) {
	t.Helper()
	if err := s.Restart(context.Background()); err != nil {
		t.Fatalf("Paperclip server: %v", err)
	}
}

// installAdapter installs the pcsync adapter built from the repository
// (POST /api/adapters/install with the local path).
func (s *server) installAdapter(t testing.TB) {
	t.Helper()
	var out map[string]any
	s.API.must(t, "POST", "/api/adapters/install", map[string]any{"packageName": s.tl.Adapter, "isLocalPath": true}, &out)
}
