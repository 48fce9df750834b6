package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// startDeadline is how long a daemon may take to fail at its start: far
// more than it needs (milliseconds), far less than "runs on until
// SIGTERM".
const startDeadline = 2 * time.Minute

// TestDaemonSpoolAtStart: a daemon whose spool cannot be served exits
// non-zero at its start with an error naming the spool, a standby too (it
// ran on, ready, until SIGTERM, and a standby until it led).
func TestDaemonSpoolAtStart(t *testing.T) {
	root := t.TempDir()
	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	orphan := filepath.Join(root, "missing", "spool")
	// A replica that would wait to lead (its API server never answers)
	// fails too, before it campaigns.
	kubeconfig := filepath.Join(root, "kubeconfig")
	kc := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\nusers: [{name: u, user: {}}]\n" +
		"contexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n"
	if err := os.WriteFile(kubeconfig, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	standby := []string{"--kubeconfig", kubeconfig, "--leader-elect", "--leader-election-namespace", "pcsync"}
	tests := []struct {
		name, spool, want string
		args              []string
	}{
		{"parent missing", orphan, "spool " + orphan + ": missing, and so is its parent directory " + filepath.Dir(orphan), nil},
		{"a regular file", file, "spool " + file + ": not a directory", nil},
		{"parent missing, waiting to lead", orphan, "spool " + orphan + ": missing", standby},
		{"a regular file, waiting to lead", file, "spool " + file + ": not a directory", standby},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), startDeadline)
			defer cancel()
			var stdout, stderr bytes.Buffer
			code := run(ctx, append([]string{"daemon", "../../examples/demo", "--spool", tt.spool, "--executor", "local",
				"--metrics-bind-address", "127.0.0.1:0"}, tt.args...), &stdout, &stderr)
			if ctx.Err() != nil {
				t.Fatalf("the daemon ran on for %s instead of failing at its start:\n%s", startDeadline, stderr.String())
			}
			if code != 2 || !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("exit %d, want 2; stderr lacks %q:\n%s", code, tt.want, stderr.String())
			}
		})
	}
}

// TestDaemonCreatesItsSpool: a missing spool whose parent exists is
// created (mode 0700) and served, whatever the executor (the walkthroughs'
// --spool /var/spool/pcsync is never created by hand).
func TestDaemonCreatesItsSpool(t *testing.T) {
	spool := filepath.Join(t.TempDir(), "pcsync")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var stderr bytes.Buffer
	go func() {
		var stdout bytes.Buffer
		done <- run(ctx, []string{"daemon", "../../examples/demo", "--spool", spool, "--executor", "local", "--log-level", "warn"}, &stdout, &stderr)
	}()
	status := filepath.Join(spool, ".pcsync", "status.json")
	deadline := time.Now().Add(startDeadline)
	for {
		if _, err := os.Stat(status); err == nil {
			break
		}
		select {
		case code := <-done:
			cancel()
			t.Fatalf("the daemon exited (%d) instead of serving its new spool:\n%s", code, stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatalf("no %s within %s:\n%s", status, startDeadline, stderr.String())
		}
	}
	fi, err := os.Stat(spool)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	code := <-done
	if diff := cmp.Diff([]any{os.ModeDir | 0o700, 0}, []any{fi.Mode(), code}); diff != "" {
		t.Errorf("the spool's mode, the daemon's exit (-want +got):\n%s\n%s", diff, stderr.String())
	}
}
