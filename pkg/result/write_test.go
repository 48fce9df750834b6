package result

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestPathFor(t *testing.T) {
	tests := []struct{ in, want string }{
		{"/spool/a.json", "/spool/a.result.json"},
		{"/spool/a.yaml", "/spool/a.result.json"},
		{"/spool/run.v2.yml", "/spool/run.v2.result.json"},
		{"rel/x.json", "rel/x.result.json"},
	}
	for _, tt := range tests {
		if got := PathFor(tt.in); got != tt.want {
			t.Errorf("PathFor(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestWriteOnceAndEveryFieldPresent(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "r1.result.json")
	r := New("r1", "acme", "coder", "claude_local")
	r.Fail(StatusFailed, ErrOOMKilled, "container killed")
	r.SetTimes(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), time.Date(2026, 1, 2, 3, 4, 7, 500e6, time.UTC))
	if err := Write(p, r); err != nil {
		t.Fatal(err)
	}
	second := r
	second.Status = StatusSucceeded
	if err := Write(p, second); !errors.Is(err, ErrExists) {
		t.Fatalf("second Write error = %v, want ErrExists", err)
	}
	got, err := Read(p)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	if *got.DurationMs != 2500 {
		t.Errorf("durationMs = %d, want 2500", *got.DurationMs)
	}
	// Every field of the contract is present, null or not.
	raw, _ := os.ReadFile(p)
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	want := []string{"adapter", "agent", "apiVersion", "company", "costUsd", "durationMs", "errorCode", "errorMessage",
		"exitCode", "finishedAt", "job", "kind", "model", "numTurns", "runId", "sessionId", "signal", "startedAt",
		"status", "summary", "timedOut", "usage", "usageBasis"}
	if diff := cmp.Diff(want, keys); diff != "" {
		t.Errorf("result keys (-want +got):\n%s", diff)
	}
	if m["usage"] != nil {
		t.Errorf("usage = %v, want null when unknown", m["usage"])
	}
	// No temp file is left behind.
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only the result", len(entries))
	}
}

func TestWriteRaceHasOneWinner(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "race.result.json")
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r := New("race", "c", "a", "claude_local")
			r.NumTurns = Ptr(i)
			err := Write(p, r)
			if err == nil {
				mu.Lock()
				wins++
				mu.Unlock()
			} else if !errors.Is(err, ErrExists) {
				t.Errorf("writer %d: %v", i, err)
			}
		}(i)
	}
	wg.Wait()
	if wins != 1 {
		t.Errorf("%d writers won, want exactly 1", wins)
	}
}

func TestErrorCodes(t *testing.T) {
	if len(AllErrorCodes()) != 17 {
		t.Errorf("got %d error codes, docs/design.md lists 17", len(AllErrorCodes()))
	}
	if ErrorCode("nope").Valid() || !ErrOOMKilled.Valid() {
		t.Error("Valid() does not tell codes from non-codes")
	}
	if Status("done").Valid() || !StatusRejected.Valid() {
		t.Error("Status.Valid() does not tell statuses from non-statuses")
	}
}
