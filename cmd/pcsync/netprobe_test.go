package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/internal/netprobe"
)

// TestNetprobe: pcsync netprobe writes the same report to stdout and to
// the termination log, one outcome per target in order; without a target,
// or with an unwritable termination log, it fails.
func TestNetprobe(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	_ = closed.Close()
	tlog := filepath.Join(t.TempDir(), "termination-log")

	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"netprobe", "--connect", l.Addr().String() + "," + closedAddr,
		"--timeout", "2s", "--termination-log", tlog}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit code %d: %s", code, stderr.String())
	}
	msg, err := os.ReadFile(tlog)
	if err != nil {
		t.Fatal(err)
	}
	if stdout.String() != string(msg) {
		t.Errorf("stdout %q, termination log %q: want the same", stdout.String(), msg)
	}
	rep, err := netprobe.Parse(string(msg))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rep.Results {
		got = append(got, r.Target+" "+string(r.Outcome))
	}
	want := []string{l.Addr().String() + " connected", closedAddr + " refused"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("outcomes (-want +got):\n%s", d)
	}

	for _, args := range [][]string{
		{"netprobe", "--termination-log", ""},
		{"netprobe", "--connect", closedAddr, "--termination-log", filepath.Join(t.TempDir(), "no", "such", "dir")},
	} {
		stdout.Reset()
		if code := run(context.Background(), args, &stdout, &stderr); code == 0 {
			t.Errorf("%v: exit code 0, want a failure", args)
		}
	}
}
