package procinit

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The test binary plays pcsync init when PROCINIT_TEST_RUN is set: Run
// reaps with wait4(-1), so it runs in a process of its own.
func TestMain(m *testing.M) {
	if os.Getenv("PROCINIT_TEST_RUN") == "1" {
		opts := DefaultOptions(os.Args[1:])
		opts.RecordFile = os.Getenv("PROCINIT_TEST_RECORD")
		opts.WaitProxy = os.Getenv("PROCINIT_TEST_WAIT_PROXY")
		if d, err := time.ParseDuration(os.Getenv("PROCINIT_TEST_WAIT_TIMEOUT")); err == nil {
			opts.WaitTimeout = d
		}
		if d, err := time.ParseDuration(os.Getenv("PROCINIT_TEST_PROXY_GRACE")); err == nil {
			opts.ProxyGrace = d
		}
		os.Exit(Run(opts))
	}
	os.Exit(m.Run())
}

// startInit starts Run on args in a child process; the Record goes to a
// file in dir.
func startInit(t *testing.T, dir string, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	return startInitEnv(t, dir, nil, args...)
}

// startInitEnv is startInit with more environment variables.
func startInitEnv(t *testing.T, dir string, env []string, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	record := filepath.Join(dir, "termination-log")
	if err := os.WriteFile(record, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), "PROCINIT_TEST_RUN=1", "PROCINIT_TEST_RECORD="+record), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, &out
}

func readRecord(t *testing.T, dir string) Record {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "termination-log"))
	if err != nil {
		t.Fatal(err)
	}
	rec, rest, ok := ParseRecord(string(b))
	if !ok {
		t.Fatalf("no record in the termination log %q", b)
	}
	if rest != "" {
		t.Errorf("termination log has %q beside the record", rest)
	}
	return rec
}

func exitStatus(t *testing.T, err error) int {
	t.Helper()
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("wait: %v", err)
	}
	return ee.ExitCode()
}

func TestRunExitStatus(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want Record
	}{
		{name: "exit 0", args: []string{"true"}, want: Record{ExitCode: 0}},
		{name: "exit 3", args: []string{"sh", "-c", "exit 3"}, want: Record{ExitCode: 3}},
		{name: "killed by SIGKILL", args: []string{"sh", "-c", "kill -KILL $$"}, want: Record{ExitCode: 137, Signal: "SIGKILL"}},
		{name: "not found", args: []string{"pcsync-no-such-command"}, want: Record{ExitCode: 127}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			cmd, out := startInit(t, dir, tt.args...)
			code := exitStatus(t, cmd.Wait())
			if code != tt.want.ExitCode {
				t.Errorf("exit status %d, want %d (output %q)", code, tt.want.ExitCode, out)
			}
			if tt.want.ExitCode == 127 {
				if !strings.Contains(out.String(), "pcsync-no-such-command") {
					t.Errorf("output %q does not name the missing command", out)
				}
				return
			}
			got := readRecord(t, dir)
			if got.FinishedAt.Before(got.StartedAt) {
				t.Errorf("record ends %s before it starts %s", got.FinishedAt, got.StartedAt)
			}
			got.StartedAt, got.FinishedAt = time.Time{}, time.Time{}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("record (-want +got):\n%s", diff)
			}
		})
	}
}

// A command whose main process has no SIGTERM handler (sleep), and a
// background child of it, both end on a SIGTERM sent to init alone.
func TestRunForwardsToGroup(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "bg.pid")
	cmd, out := startInit(t, dir, "sh", "-c", fmt.Sprintf(`sleep 300 & echo $! >%s; exec sleep 300`, pidFile))
	bg := waitForPid(t, pidFile)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code := exitStatus(t, cmd.Wait())
	if code != 143 {
		t.Errorf("exit status %d, want 143 (SIGTERM; output %q)", code, out)
	}
	if rec := readRecord(t, dir); rec.Signal != "SIGTERM" {
		t.Errorf("record's signal %q, want SIGTERM", rec.Signal)
	}
	waitGone(t, bg)
}

// An orphan (a background process whose parent exited) is reaped by init:
// no zombie child of init is left while the command still runs.
func TestRunReapsOrphans(t *testing.T) {
	dir := t.TempDir()
	// The inner sh exits at once, leaving `true` an orphan of init; the
	// command then lists init's zombie children after the orphan ended.
	script := `sh -c 'true & exit 0'; sleep 0.5
for s in /proc/[0-9]*/stat; do
  read -r line <"$s" 2>/dev/null || continue
  set -- ${line##*) }
  if [ "$1" = Z ] && [ "$2" = "$PPID" ]; then echo "zombie: $line"; exit 5; fi
done`
	cmd, out := startInit(t, dir, "sh", "-c", script)
	if code := exitStatus(t, cmd.Wait()); code != 0 {
		t.Errorf("exit status %d, want 0: %s", code, out)
	}
}

func waitForPid(t *testing.T, path string) int {
	t.Helper()
	for i := 0; i < 500; i++ {
		if b, err := os.ReadFile(path); err == nil && len(bytes.TrimSpace(b)) > 0 {
			pid, err := strconv.Atoi(string(bytes.TrimSpace(b)))
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s never written", path)
	return 0
}

// waitGone waits for pid to end (or be a zombie awaiting its new parent).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	for i := 0; i < 500; i++ {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return
		}
		if f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:])); len(f) > 0 && f[0] == "Z" {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("background process %d still runs after init forwarded SIGTERM to its group", pid)
}

func TestParseRecord(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 1, 2, 3, 456_000_000, time.UTC)
	rec := Record{StartedAt: t0, FinishedAt: t0.Add(789 * time.Millisecond), ExitCode: 143, Signal: "SIGTERM"}
	tests := []struct {
		name     string
		msg      string
		want     Record
		wantRest string
		wantOK   bool
	}{
		{name: "record alone", msg: rec.String() + "\n", want: rec, wantOK: true},
		{name: "after the command's own message", msg: "disk full\n" + rec.String() + "\n", want: rec, wantRest: "disk full", wantOK: true},
		{name: "no record", msg: "disk full", wantRest: "disk full"},
		{name: "prefix inside a line", msg: "x " + rec.String(), wantRest: "x " + rec.String()},
		{name: "bad JSON", msg: recordPrefix + "{", wantRest: recordPrefix + "{"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, rest, ok := ParseRecord(tt.msg)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("record (-want +got):\n%s", diff)
			}
			if rest != tt.wantRest || ok != tt.wantOK {
				t.Errorf("rest, ok = %q, %v; want %q, %v", rest, ok, tt.wantRest, tt.wantOK)
			}
		})
	}
	if d := rec.Duration(); d != 789*time.Millisecond {
		t.Errorf("Duration %s, want 789ms", d)
	}
}
