package spool

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/internal/testing/lockedbuf"
	"github.com/pcsync/pcsync/pkg/result"
)

// testJWT stands for the Paperclip run JWT of the callback tests.
const testJWT = "eyJhbGciOiJIUzI1NiJ9.eyJydW4iOiJsb2NhbCJ9.c2lnbmF0dXJlLWxvY2FsLXRlc3Q"

// TestCallbackReachesOnlyTheAgent: a request naming its company by
// Paperclip id, with call-back credentials and a wake context. The agent
// (a fake CLI that writes its environment to a file outside the spool and
// the state directory) gets PAPERCLIP_API_URL from the request, the JWT as
// PAPERCLIP_API_KEY, the Paperclip agent id and the context; the JWT is in
// no other file of the spool or the state directory, in no log line, no
// event, and not in `runs list`/`runs show`.
func TestCallbackReachesOnlyTheAgent(t *testing.T) {
	h := newHarness(t, "")
	logs := &lockedbuf.Buffer{}
	h.logs = logs
	req, err := json.Marshal(map[string]any{
		"apiVersion": "pcsync.io/v1alpha1", "kind": "Run", "companyId": "co-acme-1", "agent": "coder",
		"prompt":  "wake up",
		"context": map[string]any{"taskId": "T-9", "wakeReason": "assigned", "priority": 2, "urgent": true},
		"paperclip": map[string]any{"apiUrl": "http://127.0.0.1:3100", "apiKey": testJWT, "agentId": "pc-agent-7",
			"runId": "0b7c9d7e-1f2a-4c3b-9d8e-7f6a5b4c3d2e"},
	})
	if err != nil {
		t.Fatal(err)
	}
	name := "0b7c9d7e-1f2a-4c3b-9d8e-7f6a5b4c3d2e"
	h.drop(name+".json", string(req))
	h.once()

	res := h.result(name)
	if diff := cmp.Diff([]any{result.StatusSucceeded, "acme", "coder", name}, []any{res.Status, res.Company, res.Agent, res.RunID}); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
	envFile := filepath.Join(h.rec, name+".env")
	data, err := os.ReadFile(envFile)
	if err != nil {
		t.Fatal(err)
	}
	var environ []string
	if err := json.Unmarshal(data, &environ); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, kv := range environ {
		if k, v, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "PAPERCLIP_") {
			got[k] = v
		}
	}
	want := map[string]string{
		"PAPERCLIP_API_KEY":     testJWT,
		"PAPERCLIP_API_URL":     "http://127.0.0.1:3100",
		"PAPERCLIP_AGENT_ID":    "pc-agent-7",
		"PAPERCLIP_COMPANY_ID":  "co-acme-1",
		"PAPERCLIP_RUN_ID":      name,
		"PAPERCLIP_TASK_ID":     "T-9",
		"PAPERCLIP_WAKE_REASON": "assigned",
		"PAPERCLIP_PRIORITY":    "2",
		"PAPERCLIP_URGENT":      "true",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("agent's PAPERCLIP_* environment (-want +got):\n%s", diff)
	}

	// Every file under the test directory, but the request and the
	// agent's own record of its environment.
	allowed := map[string]bool{envFile: true, filepath.Join(h.spool, name+".json"): true}
	err = filepath.WalkDir(h.dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil || de.IsDir() || allowed[p] || !de.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(testJWT)) {
			t.Errorf("the JWT is in %s", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), testJWT) {
		t.Error("the JWT is in the daemon's logs")
	}
	if !strings.Contains(logs.String(), name) {
		t.Error("the captured logs do not mention the run: the check above proves nothing")
	}
	events, _ := json.Marshal(h.recorded())
	if strings.Contains(string(events), testJWT) {
		t.Error("the JWT is in an event")
	}
	l, err := ListRuns(h.spool, h.state)
	if err != nil {
		t.Fatal(err)
	}
	info, err := ShowRun(h.spool, h.state, name)
	if err != nil {
		t.Fatal(err)
	}
	for what, v := range map[string]any{"runs list": l, "runs show": info} {
		b, _ := json.Marshal(v)
		if strings.Contains(string(b), testJWT) {
			t.Errorf("the JWT is in the %s output", what)
		}
	}
}

// TestCallbackKeyRedactedFromErrors: an agent that prints the JWT on its
// standard error and fails; the result's message hides it, and no file of
// the spool or the state directory but the request holds it (<name>.log is
// redacted too).
func TestCallbackKeyRedactedFromErrors(t *testing.T) {
	h := newHarness(t, "")
	h.drop("leak.json", `{"apiVersion":"pcsync.io/v1alpha1","kind":"Run","company":"acme","agent":"failer","prompt":"x",
		"paperclip":{"apiKey":"`+testJWT+`"}}`)
	// The failer prints its keys, the run's JWT among them, on stderr.
	h.once()
	res := h.result("leak")
	msg, _ := deref(res.ErrorMessage).(string)
	if res.Status != result.StatusFailed || msg == "" {
		t.Fatalf("result: %s %q, want failed with a message", res.Status, msg)
	}
	if strings.Contains(msg, testJWT) || !strings.Contains(strings.ToLower(msg), "[redacted]") {
		t.Errorf("the error message does not hide the JWT it quotes: %s", msg)
	}
	request := filepath.Join(h.spool, "leak.json")
	err := filepath.WalkDir(h.spool, func(p string, de fs.DirEntry, err error) error {
		if err != nil || de.IsDir() || p == request || !de.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(testJWT)) {
			t.Errorf("the JWT is in %s", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
