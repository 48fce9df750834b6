package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pcsync/pcsync/internal/testing/hostilespool"
	"github.com/pcsync/pcsync/pkg/result"
	"github.com/pcsync/pcsync/pkg/runs/localexec"
)

// init lets the test binary be the run shim that the local executor starts
// as `<executable> daemon run-shim …` (an init, not a TestMain, so that it
// also works beside the package's TestMain, whichever that is).
func init() {
	if len(os.Args) > 2 && os.Args[1] == "daemon" && os.Args[2] == localexec.ShimArg {
		os.Exit(localexec.ShimMain(os.Args[3:]))
	}
}

// guarded runs fn and fails the test when it does not return: on a hostile
// spool a hang is the failure.
func guarded(t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s did not return: it hangs on the hostile spool", what)
	}
}

// TestHostileSpoolDaemonOnceAndRunsList: `pcsync daemon --once` with the
// local executor (examples/demo's fake agent) ends by itself on the hostile
// spool, touches nothing outside it, runs the good request; `pcsync runs
// list` answers and quotes names with escape sequences; `runs show` takes
// names, not paths.
func TestHostileSpoolDaemonOnceAndRunsList(t *testing.T) {
	dir := t.TempDir()
	spool, outside := filepath.Join(dir, "spool"), filepath.Join(dir, "outside")
	for _, d := range []string{spool, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	c := hostilespool.Build(t, spool, outside, func(runID string) []byte {
		return []byte("apiVersion: pcsync.io/v1alpha1\nkind: Run\ncompany: acme\nagent: coder\nprompt: hi\nrunId: " + runID + "\n")
	})
	guarded(t, "pcsync daemon --once", func() {
		code, _, stderr := pcsync(t, "daemon", "--config", "../../examples/demo", "--spool", spool, "--executor", "local", "--once", "--log-level", "warn")
		if code != 0 {
			t.Errorf("daemon --once: exit %d\n%s", code, stderr)
		}
	})
	c.CheckOutside(t)
	r, err := result.Read(filepath.Join(spool, hostilespool.Good+".result.json"))
	if err != nil || r.Status != result.StatusSucceeded {
		t.Errorf("good: %v %s %v", err, r.Status, deref(r.ErrorMessage))
	}

	guarded(t, "pcsync runs list", func() {
		code, stdout, stderr := pcsync(t, "runs", "list", "--spool", spool)
		if code != 0 {
			t.Errorf("runs list: exit %d\n%s", code, stderr)
		}
		if strings.ContainsAny(stdout, "\x1b\x07") {
			t.Errorf("runs list prints a terminal escape sequence raw:\n%q", stdout)
		}
		for _, want := range []string{`"esc-\x1b[31mred\x1b[0m-\x1b]0;pwned\a"`, "fifo-result.result.json: not a regular file: a named pipe"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("runs list does not show %s:\n%s", want, stdout)
			}
		}
	})
	guarded(t, "pcsync runs show", func() {
		for _, name := range []string{"../../x", "../spool/good", "/etc/passwd"} {
			code, _, stderr := pcsync(t, "runs", "show", name, "--spool", spool)
			if code == 0 || !strings.Contains(stderr, "is not a request name") {
				t.Errorf("runs show %s: exit %d, %s; want a refusal", name, code, stderr)
			}
		}
		code, stdout, stderr := pcsync(t, "runs", "show", hostilespool.FIFOResult, "--spool", spool)
		if code != 0 || !strings.Contains(stdout, "ignored") {
			t.Errorf("runs show %s: exit %d\n%s%s", hostilespool.FIFOResult, code, stdout, stderr)
		}
	})
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}
