package cmdserver_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pcsync/pcsync/internal/lib/safefile"
	"github.com/pcsync/pcsync/pkg/sandbox/cmdserver"
)

// TestMain lets the test binary act as a server process for
// TestInheritedFilesClosed: PCSYNC_TEST_SERVE=socket[,keep] runs Serve on
// socket, closing the files it inherited unless keep.
func TestMain(m *testing.M) {
	if v := os.Getenv("PCSYNC_TEST_SERVE"); v != "" {
		os.Exit(serveMain(v))
	}
	os.Exit(m.Run())
}

func serveMain(v string) int {
	socket, keep, _ := strings.Cut(v, ",")
	if keep != "keep" {
		if _, err := cmdserver.CloseInherited(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	opts := cmdserver.DefaultOptions()
	opts.Socket = socket
	opts.Logger = slog.New(slog.DiscardHandler)
	if err := cmdserver.Serve(context.Background(), opts); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// TestServerStopsWhenSocketRemoved: a server whose socket's directory is
// removed can no longer be reached, and stops (killing what it started).
func TestServerStopsWhenSocketRemoved(t *testing.T) {
	for _, tc := range []struct {
		name   string
		remove func(socket string) error
	}{
		{"directory", func(s string) error { return os.RemoveAll(filepath.Dir(s)) }},
		{"socket", os.Remove},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := testOptions(t)
			opts.Watch = 10 * time.Millisecond
			done := serve(t, opts)
			if err := tc.remove(opts.Socket); err != nil {
				t.Fatal(err)
			}
			waitStopped(t, done, "its socket's "+tc.name+" removed")
		})
	}
}

// TestServerStopsWithItsOwner: a server with OwnerPID stops when that
// process ends, and not before.
func TestServerStopsWithItsOwner(t *testing.T) {
	owner := exec.Command("sleep", "600")
	if err := owner.Start(); err != nil {
		t.Fatal(err)
	}
	// The server reaps every child of this process (a subreaper): no Wait.
	t.Cleanup(func() { _ = owner.Process.Kill() })
	opts := testOptions(t)
	opts.Watch = 10 * time.Millisecond
	opts.OwnerPID = owner.Process.Pid
	done := serve(t, opts)
	c, _ := dial(t, opts.Socket)
	c.sync() // still serving after many checks of a live owner
	select {
	case err := <-done:
		t.Fatalf("Serve returned while its owner runs: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	if err := owner.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	waitStopped(t, done, "its owner ended")
}

// waitStopped waits for Serve to return nil; a server still running after
// 10 s fails the test.
func waitStopped(t *testing.T, done chan error, why string) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
		done <- nil // for serve's cleanup
	case <-time.After(10 * time.Second):
		t.Fatalf("server still running 10 s after %s", why)
	}
}

// TestInheritedFilesClosed starts a server process that inherits a file
// holding a lock (as a server spawned by a relay inherits what the node's
// agent left open): CloseInherited lets the lock go; the control, a server
// that keeps what it inherited, holds it.
func TestInheritedFilesClosed(t *testing.T) {
	for _, tc := range []struct {
		mode     string
		wantHeld bool
	}{{"", false}, {"keep", true}} {
		t.Run("mode="+tc.mode, func(t *testing.T) {
			lockPath := filepath.Join(t.TempDir(), "held.lock")
			lock, err := safefile.TryLock(lockPath, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(lockPath) // another description: the lock is the child's alone once ours closes
			if err != nil {
				t.Fatal(err)
			}
			lock.Unlock()
			if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
				t.Fatal(err)
			}
			socket := testOptions(t).Socket
			srv := exec.Command(os.Args[0], "-test.run=^$")
			srv.Env = append(os.Environ(), "PCSYNC_TEST_SERVE="+socket+","+tc.mode)
			srv.ExtraFiles = []*os.File{f} // fd 3, without close-on-exec
			if err := srv.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
			f.Close()
			waitListening(t, socket)
			_, err = safefile.TryLock(lockPath, 0o600)
			if held := errors.Is(err, safefile.ErrLocked); held != tc.wantHeld {
				t.Errorf("lock held by the server: %v (%v), want %v", held, err, tc.wantHeld)
			}
		})
	}
}

// waitListening waits up to 10 s for socket to accept a connection.
func waitListening(t *testing.T, socket string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		nc, err := net.Dial("unix", socket)
		if err == nil {
			nc.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("server not listening on %s: %v", socket, err)
		}
		time.Sleep(5 * time.Millisecond) // waiting for the process to listen
	}
}
