package spool

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/pkg/result"
)

func TestRunSucceedsWithEveryField(t *testing.T) {
	h := newHarness(t, "")
	req := request("coder", "context: {taskId: T-42, wakeReason: assigned, attempt: 3, urgent: true}\n")
	h.drop("hello.yaml", req)
	h.once()

	got := h.result("hello")
	if got.StartedAt == nil || got.FinishedAt == nil || got.DurationMs == nil {
		t.Fatalf("times not set: %+v", got)
	}
	got.StartedAt, got.FinishedAt, got.DurationMs = nil, nil, nil
	want := result.New("hello", "acme", "coder", "claude_local")
	want.Status = result.StatusSucceeded
	want.ExitCode = result.Ptr(0)
	want.SessionID = result.Ptr("5e55a7e0-0000-4000-8000-000000000009")
	want.Summary = result.Ptr("handled a prompt of 9 bytes")
	want.Model = result.Ptr("claude-sonnet-4-6")
	want.NumTurns = result.Ptr(1)
	want.CostUSD = result.Ptr(0.0125)
	want.Usage = &result.Usage{InputTokens: 3, CachedInputTokens: 100, CacheCreationInputTokens: 50, OutputTokens: 7}
	want.UsageBasis = result.Ptr(result.UsagePerRun)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}

	// The environment: forwarded keys, agent env, adapter env, HOME and the
	// wake context; nothing else of the daemon's.
	var env []string
	b, err := os.ReadFile(filepath.Join(h.rec, "hello.env"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &env); err != nil {
		t.Fatal(err)
	}
	envMap := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		envMap[k] = v
	}
	wantEnv := map[string]string{
		"PATH":                  os.Getenv("PATH"),
		"LANG":                  "C.UTF-8",
		"ANTHROPIC_API_KEY":     "sk-test-secret-value-123456",
		"AGENT_MODE":            "ok",
		"RECORD_DIR":            h.rec,
		"RELEASE_DIR":           h.release,
		"HOME":                  filepath.Join(h.state, "home", "acme", "coder"),
		"PAPERCLIP_TASK_ID":     "T-42",
		"PAPERCLIP_WAKE_REASON": "assigned",
		"PAPERCLIP_ATTEMPT":     "3",
		"PAPERCLIP_URGENT":      "true",
		"PAPERCLIP_RUN_ID":      "hello",
		"PAPERCLIP_COMPANY_ID":  "co-acme-1",
		"PAPERCLIP_AGENT_ID":    "coder",
	}
	for k, v := range wantEnv {
		if envMap[k] != v {
			t.Errorf("agent env %s = %q, want %q", k, envMap[k], v)
		}
	}
	if _, ok := envMap["UNRELATED_SECRET"]; ok {
		t.Error("a variable of the daemon's environment that is not forwarded reached the agent")
	}
	for k := range envMap {
		if _, ok := wantEnv[k]; !ok && !strings.HasPrefix(k, "IS_SANDBOX") && !strings.HasPrefix(k, "CLAUDE_CODE_") {
			t.Errorf("unexpected variable %s in the agent's environment", k)
		}
	}

	cwd, _ := os.ReadFile(filepath.Join(h.rec, "hello.cwd"))
	if string(cwd) != filepath.Join(h.state, "work", "hello") {
		t.Errorf("agent ran in %s, want the run's work directory", cwd)
	}
	log, err := os.ReadFile(filepath.Join(h.spool, "hello.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), `"subtype":"init"`) || !strings.Contains(string(log), `"type":"result"`) {
		t.Errorf("log lacks the agent's stdout:\n%s", log)
	}
	if b, _ := os.ReadFile(filepath.Join(h.spool, "hello.yaml")); string(b) != req {
		t.Error("the request file was changed")
	}
	if _, err := os.Stat(filepath.Join(h.state, "runs", "hello")); !os.IsNotExist(err) {
		t.Errorf("run state directory still there after the result: %v", err)
	}
	raw, _ := os.ReadFile(filepath.Join(h.spool, "hello.result.json"))
	if strings.Contains(string(raw), "sk-test-secret") {
		t.Error("a forwarded secret appears in the result")
	}
}

func TestFailedAgentIsAResult(t *testing.T) {
	h := newHarness(t, "")
	h.drop("broken.json", `{"apiVersion":"pcsync.io/v1alpha1","kind":"Run","company":"acme","agent":"failer","prompt":"x"}`)
	h.once()
	got := h.result("broken")
	if got.Status != result.StatusFailed || deref(got.ErrorCode) != result.ErrAgentFailed || deref(got.ExitCode) != 3 {
		t.Errorf("status %s errorCode %v exitCode %v, want failed agent_failed 3", got.Status, deref(got.ErrorCode), deref(got.ExitCode))
	}
	if msg := deref(got.ErrorMessage); msg == nil || !strings.Contains(msg.(string), "told to fail") {
		t.Errorf("errorMessage %v does not carry the agent's stderr", msg)
	}
	if got.SessionID == nil {
		t.Error("the session id of the init line was lost")
	}
	raw, _ := os.ReadFile(filepath.Join(h.spool, "broken.result.json"))
	if strings.Contains(string(raw), "sk-test-secret") {
		t.Errorf("a forwarded secret the agent printed reached the result:\n%s", raw)
	}
}

func TestRenamedInRequestsRunAndTempFilesAreIgnored(t *testing.T) {
	h := newHarness(t, "")
	h.start()
	for _, f := range []string{".hidden.json", "partial.json.tmp", "notes.txt", "old.log", "x.cancel"} {
		if err := os.WriteFile(filepath.Join(h.spool, f), []byte("garbage"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h.drop("one.yaml", request("coder", ""))
	h.drop("two.json", `{"apiVersion":"pcsync.io/v1alpha1","kind":"Run","company":"acme","agent":"coder","prompt":"p","runId":"second-run"}`)
	if r := h.result("one"); r.Status != result.StatusSucceeded {
		t.Errorf("one: %s %v", r.Status, deref(r.ErrorMessage))
	}
	if r := h.result("two"); r.Status != result.StatusSucceeded || r.RunID != "second-run" {
		t.Errorf("two: %s runId %s", r.Status, r.RunID)
	}
	h.stop()
	entries, _ := os.ReadDir(h.spool)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	want := []string{".hidden.json", ".pcsync", "notes.txt", "old.log", "one.log", "one.result.json", "one.yaml",
		"partial.json.tmp", "two.json", "two.log", "two.result.json", "x.cancel"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("spool files (-want +got):\n%s", diff)
	}
}

func TestRescanFindsRequestsWithoutEvents(t *testing.T) {
	h := newHarness(t, "")
	h.watch = false // as if fsnotify missed everything
	h.rescan = 50 * time.Millisecond
	h.start()
	h.drop("late.yaml", request("coder", ""))
	if r := h.result("late"); r.Status != result.StatusSucceeded {
		t.Errorf("late: %s %v", r.Status, deref(r.ErrorMessage))
	}
}

func TestOnceHandlesOnlyRequestsPresentAtStart(t *testing.T) {
	h := newHarness(t, "")
	h.drop("a.yaml", request("coder", ""))
	h.drop("b.yaml", request("coder", ""))
	h.once()
	for _, n := range []string{"a", "b"} {
		if r := h.result(n); r.Status != result.StatusSucceeded {
			t.Errorf("%s: %s", n, r.Status)
		}
	}
	// Done requests are not run again by the next daemon.
	h.once()
	if n := h.starts("a"); n != 1 {
		t.Errorf("a started %d times, want 1", n)
	}
}

func TestDuplicateRunIDIsRejected(t *testing.T) {
	h := newHarness(t, "")
	h.drop("first.yaml", request("coder", "runId: same\n"))
	h.once()
	h.drop("second.yaml", request("coder", "runId: same\n"))
	h.once()
	got := h.result("second")
	if got.Status != result.StatusRejected || !strings.Contains(deref(got.ErrorMessage).(string), `"same" is already the run id of request "first"`) {
		t.Errorf("second: %s %v", got.Status, deref(got.ErrorMessage))
	}
	if !slices.Contains([]result.Status{result.StatusSucceeded}, h.result("first").Status) {
		t.Error("first did not succeed")
	}
}
