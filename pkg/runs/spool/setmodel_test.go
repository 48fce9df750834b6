package spool

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/result"
)

// TestSetModelAcceptsNewAgents swaps in a config with a new agent while the
// daemon runs: a request for it is rejected before the swap and runs after
// it, without a restart.
func TestSetModelAcceptsNewAgents(t *testing.T) {
	h := newHarness(t, "")
	d, err := New(h.model, h.executor(), h.options(false))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("daemon: %v", err)
		}
	}()

	h.drop("before.yaml", request("newbie", ""))
	if got := h.result("before").Status; got != result.StatusRejected {
		t.Fatalf("request for an agent not yet in the config: status %s, want rejected", got)
	}

	// The same config with one more agent, loaded from a second directory.
	cfg, err := os.ReadFile(filepath.Join(h.dir, "config", "fleet.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	newbie := strings.Replace(defaultAgents, "  - name: coder\n", "  - name: newbie\n    adapter: claude_local\n    env: {AGENT_MODE: ok}\n  - name: coder\n", 1)
	head, _, ok := strings.Cut(string(cfg), "  agents:")
	if !ok {
		t.Fatal("test config has no agents list")
	}
	next := head + "  agents:" + injectEnv(h, newbie)
	dir2 := filepath.Join(h.dir, "config2")
	if err := os.MkdirAll(dir2, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir2, "fleet.yaml"), []byte(next), 0o644); err != nil {
		t.Fatal(err)
	}
	m2, err := config.Load(context.Background(), dir2, config.LoadOptions{})
	if err != nil {
		t.Fatalf("load the new config: %v", err)
	}
	d.SetModel(m2)
	if d.Model() != m2 {
		t.Fatal("Model() does not return the model just set")
	}
	d.SetModel(nil) // ignored
	if d.Model() != m2 {
		t.Fatal("SetModel(nil) replaced the model")
	}

	h.drop("after.yaml", request("newbie", ""))
	got := h.result("after")
	if diff := cmp.Diff([]any{result.StatusSucceeded, "newbie"}, []any{got.Status, got.Agent}); diff != "" {
		t.Errorf("request for the new agent (-want +got):\n%s", diff)
	}
}

// injectEnv gives agents the harness's record and release directories, as
// newHarness does.
func injectEnv(h *harness, agents string) string {
	return strings.ReplaceAll(agents, "env: {", "env: {RECORD_DIR: \""+h.rec+"\", RELEASE_DIR: \""+h.release+"\", ")
}
