package spool

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/result"
	"github.com/pcsync/pcsync/pkg/runs"
	"github.com/pcsync/pcsync/pkg/runs/localexec"
)

// TestExamplesDemoAndResume runs the shipped demo (examples/demo with
// examples/agents/fake-claude) on examples/spool/hello.yaml, then resumes
// the session it created: the fake agent keeps its sessions under HOME,
// which is the agent's own and survives between runs.
func TestExamplesDemoAndResume(t *testing.T) {
	m, err := config.Load(context.Background(), "../../../examples/demo", config.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spool := t.TempDir()
	hello, err := os.ReadFile("../../../examples/spool/hello.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(spool, "hello.yaml"), hello, 0o644); err != nil {
		t.Fatal(err)
	}
	once := func() {
		t.Helper()
		exec, err := localexec.New(localexec.Options{StateDir: runs.DefaultStateDir(spool), Shim: []string{os.Args[0], localexec.ShimArg},
			Environ: []string{"PATH=" + os.Getenv("PATH")}, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		o := DefaultOptions(spool)
		o.Once, o.Logger = true, slog.New(slog.DiscardHandler)
		d, err := New(m, exec, o)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	once()
	first, err := result.Read(filepath.Join(spool, "hello.result.json"))
	if err != nil {
		t.Fatal(err)
	}
	if first.Status != result.StatusSucceeded || first.SessionID == nil || first.CostUSD == nil || first.Usage == nil {
		t.Fatalf("hello: %s session %v cost %v usage %v", first.Status, deref(first.SessionID), deref(first.CostUSD), first.Usage)
	}
	resume := fmt.Sprintf(`{"apiVersion":"pcsync.io/v1alpha1","kind":"Run","company":"acme","agent":"coder","prompt":"go on","sessionId":%q}`, *first.SessionID)
	if err := os.WriteFile(filepath.Join(spool, "again.json"), []byte(resume), 0o644); err != nil {
		t.Fatal(err)
	}
	once()
	second, err := result.Read(filepath.Join(spool, "again.result.json"))
	if err != nil {
		t.Fatal(err)
	}
	if second.Status != result.StatusSucceeded || deref(second.SessionID) != *first.SessionID {
		t.Errorf("resume: %s session %v (%v), want succeeded in session %s", second.Status, deref(second.SessionID), deref(second.ErrorMessage), *first.SessionID)
	}
}
