package spool

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/runs"
	"github.com/pcsync/pcsync/pkg/runs/localexec"
)

// TestMain lets the test binary be the run shim and the test agent: the
// local executor starts real processes, never mocks.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case localexec.ShimArg:
			os.Exit(localexec.ShimMain(os.Args[2:]))
		case "test-agent":
			os.Exit(testAgent())
		case "test-daemon":
			os.Exit(testDaemon(os.Args[2:]))
		}
	}
	os.Exit(m.Run())
}

// testAgent is a fake Claude Code CLI driven by its environment (the
// agent's env in the test config):
//
//	AGENT_MODE  ok | block | block-ignore-term | fail | garbage
//	RECORD_DIR  where it records <runId>.start, <runId>.env and <runId>.args
//	RELEASE_DIR block modes wait for <runId> to appear there
//
// It reads the prompt from stdin and prints stream-json lines like the
// real CLI (see testdata/agent-samples/claude-*.jsonl).
func testAgent() int {
	runID := os.Getenv("PAPERCLIP_RUN_ID")
	rec := os.Getenv("RECORD_DIR")
	mode := os.Getenv("AGENT_MODE")
	if mode == "block-ignore-term" {
		signal.Ignore(syscall.SIGTERM)
	}
	prompt, _ := io.ReadAll(os.Stdin)
	if rec != "" {
		f, err := os.OpenFile(filepath.Join(rec, runID+".start"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err == nil {
			fmt.Fprintf(f, "%d\n", os.Getpid())
			f.Close()
		}
		env, _ := json.Marshal(os.Environ())
		_ = os.WriteFile(filepath.Join(rec, runID+".env"), env, 0o644)
		args, _ := json.Marshal(os.Args[2:])
		_ = os.WriteFile(filepath.Join(rec, runID+".args"), args, 0o644)
		cwd, _ := os.Getwd()
		_ = os.WriteFile(filepath.Join(rec, runID+".cwd"), []byte(cwd), 0o644)
	}
	if mode == "codex" {
		return testCodex(runID)
	}
	if mode == "leak" {
		return testLeak()
	}
	session := "5e55a7e0-0000-4000-8000-" + fmt.Sprintf("%012d", len(prompt))
	for i, a := range os.Args {
		if a == "--resume" && i+1 < len(os.Args) {
			session = os.Args[i+1]
		}
	}
	emit := func(v any) {
		b, _ := json.Marshal(v)
		os.Stdout.Write(append(b, '\n'))
	}
	emit(map[string]any{"type": "system", "subtype": "init", "session_id": session, "model": "claude-sonnet-4-6", "cwd": "."})
	switch mode {
	case "fail":
		fmt.Fprintln(os.Stderr, "fatal: the fake agent was told to fail; key", os.Getenv("ANTHROPIC_API_KEY"), os.Getenv("PAPERCLIP_API_KEY"))
		return 3
	case "garbage":
		os.Stdout.Write([]byte("not json at all\n\x00\x01\x02{\"type\":\n"))
	case "block", "block-ignore-term":
		rel := filepath.Join(os.Getenv("RELEASE_DIR"), runID)
		for {
			if _, err := os.Stat(rel); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	emit(map[string]any{"type": "assistant", "session_id": session, "message": map[string]any{
		"model": "claude-sonnet-4-6", "role": "assistant",
		"content": []any{map[string]any{"type": "text", "text": "done"}},
		"usage":   map[string]any{"input_tokens": 3, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 50, "output_tokens": 7},
	}})
	emit(map[string]any{
		"type": "result", "subtype": "success", "is_error": false, "num_turns": 1,
		"result": fmt.Sprintf("handled a prompt of %d bytes", len(prompt)), "session_id": session,
		"total_cost_usd": 0.0125,
		"usage":          map[string]any{"input_tokens": 3, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 50, "output_tokens": 7},
		"modelUsage": map[string]any{"claude-sonnet-4-6": map[string]any{
			"inputTokens": 3, "outputTokens": 7, "cacheReadInputTokens": 100, "cacheCreationInputTokens": 50, "costUSD": 0.0125}},
	})
	return 0
}

// testLeak is an agent that echoes its API key everywhere: into stderr (the
// key split across two writes, with a pause between them so that the
// daemon most likely reads the first half alone), an Authorization header,
// the session id, the model and the summary.
//
// The pause is the one sleep left in this package's tests on purpose: the
// agent is another process, which testing/synctest's clock does not reach,
// and nothing the daemon does can be observed from here before it writes
// (it holds back a half secret). It proves nothing by waiting: a shorter
// pause only reads both halves at once. The split itself is proved without
// timing by internal/lib/redact's TestLineWriterSecretSplitAcrossWrites.
func testLeak() int {
	key := os.Getenv("ANTHROPIC_API_KEY")
	fmt.Fprint(os.Stderr, "debug: using key "+key[:10])
	time.Sleep(300 * time.Millisecond)
	fmt.Fprintln(os.Stderr, key[10:]+" with Authorization: Bearer pc1-abcdef0123456789")
	emit := func(v any) {
		b, _ := json.Marshal(v)
		os.Stdout.Write(append(b, '\n'))
	}
	session := "sess-" + key
	emit(map[string]any{"type": "system", "subtype": "init", "session_id": session, "model": "model-" + key, "cwd": "."})
	emit(map[string]any{"type": "assistant", "session_id": session, "message": map[string]any{
		"model": "model-" + key, "role": "assistant",
		"content": []any{map[string]any{"type": "text", "text": "the key is " + key}},
	}})
	emit(map[string]any{"type": "result", "subtype": "success", "is_error": false, "num_turns": 1,
		"result": "summary: the key is " + key, "session_id": session})
	return 0
}

// testDaemon serves a spool in its own process until it is killed: args
// are the config directory and the spool. The restart tests kill it hard.
func testDaemon(args []string) int {
	m, err := config.Load(context.Background(), args[0], config.LoadOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	exec, err := localexec.New(localexec.Options{StateDir: runs.DefaultStateDir(args[1]), Shim: []string{os.Args[0], localexec.ShimArg},
		Environ: os.Environ(), PollInterval: 20 * time.Millisecond})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	d, err := New(m, exec, DefaultOptions(args[1]))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := d.Run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// testCodex is a fake `codex exec --json`: it resumes the thread named
// after "resume" or starts thread-<runId>, and reports the thread's
// cumulative usage, kept under $HOME like the real CLI keeps its rollouts:
// each run adds 1000 input tokens (600 of them cached) and 50 output.
func testCodex(runID string) int {
	thread := "thread-" + runID
	for i, a := range os.Args {
		if a == "resume" && i+1 < len(os.Args) {
			thread = os.Args[i+1]
		}
	}
	store := filepath.Join(os.Getenv("HOME"), ".fake-codex", thread)
	var total struct{ In, Cached, Out int }
	if b, err := os.ReadFile(store); err == nil {
		_ = json.Unmarshal(b, &total)
	}
	total.In, total.Cached, total.Out = total.In+1000, total.Cached+600, total.Out+50
	_ = os.MkdirAll(filepath.Dir(store), 0o700)
	b, _ := json.Marshal(total)
	_ = os.WriteFile(store, b, 0o600)
	fmt.Printf(`{"type":"thread.started","thread_id":%q}`+"\n", thread)
	fmt.Println(`{"type":"turn.started"}`)
	fmt.Println(`{"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":"codex did it"}}`)
	fmt.Printf(`{"type":"turn.completed","usage":{"input_tokens":%d,"cached_input_tokens":%d,"output_tokens":%d}}`+"\n",
		total.In, total.Cached, total.Out)
	return 0
}
