package spool

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/pkg/result"
	"github.com/pcsync/pcsync/pkg/runs"
)

// badRequests maps every file of testdata/badrequests, and the few bad
// requests generated here (too big to keep), to a fragment its rejection
// message must hold.
var badRequests = map[string]string{
	"malformed.json":         `JSON syntax error: unexpected end of JSON input`,
	"malformed-yaml.yaml":    `YAML syntax error: did not find expected ',' or ']'`,
	"unknown-company.yaml":   `company: company "globex" is not in the config (companies: acme)`,
	"unknown-agent.yaml":     `agent: company "acme" has no agent "ghost"`,
	"missing-prompt.yaml":    `prompt: field is required`,
	"empty-prompt.json":      `empty-prompt.json:1:91: prompt: invalid value "": must not be empty`,
	"bad-runid.yaml":         `bad-runid.yaml:6:8: runId: invalid value "Bad_ID": must be a DNS label`,
	"Not_A_DNS_Name.yaml":    `no runId given and the file name "Not_A_DNS_Name" is not a DNS-safe run id`,
	"unknown-field.yaml":     `unknown-field.yaml:6:1: image: field not allowed`,
	"alias-bomb.yaml":        `alias-bomb.yaml:5:26: document too large`,
	"binary.json":            `JSON syntax error: invalid character`,
	"binary-bytes.yaml":      `binary-bytes.yaml:1:1: YAML syntax error: control characters are not allowed`,
	"wrong-kind.yaml":        `wrong-kind.yaml:2:7: kind: unknown kind "Company"`,
	"wrong-apiversion.yaml":  `wrong-apiversion.yaml:1:13: apiVersion: unknown apiVersion "pcsync.io/v2"`,
	"two-documents.yaml":     `two-documents.yaml:7:1: a run request holds one document`,
	"bad-context.yaml":       `bad-context.yaml:7:3: context.taskId:`,
	"negative-timeout.yaml":  `negative-timeout.yaml:6:13: timeoutSec: invalid value -5: must be at least 1`,
	"session-flag.yaml":      `sessionId: claude_local: session id "--dangerously-load-plugin" is not an id`,
	"empty.yaml":             `empty.yaml:1:1: run request is empty`,
	"array.json":             `array.json:1:1: a document must be a mapping`,
	"prompt-not-string.yaml": `prompt-not-string.yaml:5:9: prompt: expected string, got int`,
	// The protocol fields of issue 11: exact messages.
	"company-and-companyid.yaml":    `company-and-companyid.yaml: company, companyId: give one of them, not both: company (the slug) or companyId (the Paperclip company id)`,
	"no-company.yaml":               `no-company.yaml: company: field is required: give the company's slug (company) or its Paperclip id (companyId)`,
	"unknown-companyid.json":        `unknown-companyid.json: companyId: no company of the config has spec.id "9b2f0c7e-unknown" (companies: acme); set the Paperclip company id as spec.id of the Company that serves it`,
	"context-too-many-keys.json":    `context-too-many-keys.json: context: 65 keys, more than the 64 allowed`,
	"context-long-key.json":         `context-long-key.json: context.k` + strings.Repeat("x", 63) + `…: key is 65 bytes long, more than the 64 allowed`,
	"context-nul.json":              `context-nul.json: context.taskId: value holds a NUL byte, which an environment variable cannot carry`,
	"context-same-variable.json":    `context-same-variable.json: context.task_id: becomes PAPERCLIP_TASK_ID, as context.taskId does; keep one of them`,
	"context-reserved.json":         `context-reserved.json: context.apiKey: would set PAPERCLIP_API_KEY, which pcsync sets from paperclip.apiKey; send it there`,
	"paperclip-key-control.json":    `paperclip-key-control.json: paperclip.apiKey: holds a control character (NUL, line break, …); a Paperclip run JWT has none`,
	"paperclip-bad-url.json":        `paperclip-bad-url.json:1:130: paperclip.apiUrl: invalid value "ftp://paperclip": must be an http:// or https:// URL with a host and an optional path, without user, password, query or fragment`,
	"paperclip-unknown-field.json":  `paperclip-unknown-field.json:1:188: paperclip.token: field not allowed`,
	"paperclip-key-not-string.json": `paperclip-key-not-string.json:1:130: paperclip.apiKey: expected string, got int`,
	// Generated below.
	"context-big-value.json": `context-big-value.json: context.taskMarkdown: value is 16385 bytes, more than the 16 KiB (16384 bytes) allowed`,
	"context-too-large.json": `context-too-large.json: context: keys and values take 307260 bytes, more than the 256 KiB (262144 bytes) allowed`,
	"huge.json":              `huge.json: request is larger than 2 MiB (2097152 bytes)`,
	"huge-prompt.json":       `huge-prompt.json:1:91: prompt: prompt is larger than 1 MiB (1048576 bytes)`,
	"twice.json":             `several requests are named "twice" (twice.json, twice.yaml)`,
	"twice.yaml":             `several requests are named "twice" (twice.json, twice.yaml)`,
	"link.yaml":              `link.yaml: not a regular file: a symbolic link; a request must be a regular file`,
	"pipe.json":              `pipe.json: not a regular file: a named pipe; a request must be a regular file`,
}

func TestBadRequestsAreRejected(t *testing.T) {
	h := newHarness(t, "")
	corpus, err := filepath.Glob("testdata/badrequests/*")
	if err != nil {
		t.Fatal(err)
	}
	contents := map[string][]byte{}
	for _, p := range corpus {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		contents[filepath.Base(p)] = b
	}
	contents["huge.json"] = bytes.Repeat([]byte(" "), 3<<20)
	contents["huge-prompt.json"] = []byte(fmt.Sprintf(`{"apiVersion":"pcsync.io/v1alpha1","kind":"Run","company":"acme","agent":"coder","prompt":%q}`,
		strings.Repeat("x", 1<<20+1)))
	big := map[string]any{"taskMarkdown": strings.Repeat("m", runs.MaxContextValueBytes+1)}
	contents["context-big-value.json"] = runRequestJSON(t, map[string]any{"context": big})
	large := map[string]any{}
	for i := range 20 {
		large[fmt.Sprintf("k%02d", i)] = strings.Repeat("v", 15<<10)
	}
	contents["context-too-large.json"] = runRequestJSON(t, map[string]any{"context": large})
	contents["twice.json"] = []byte(`{"apiVersion":"pcsync.io/v1alpha1","kind":"Run","company":"acme","agent":"coder","prompt":"a"}`)
	contents["twice.yaml"] = []byte(request("coder", ""))
	// A link to a file pcsync must not quote, and a FIFO that would block
	// a reader: no content to compare.
	secret := filepath.Join(h.dir, "secret.yaml")
	if err := os.WriteFile(secret, []byte("password: hunter2-do-not-quote\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(h.spool, "link.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(h.spool, "pipe.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	contents["link.yaml"], contents["pipe.json"] = nil, nil

	var files, want []string
	for f := range contents {
		files = append(files, f)
	}
	for f := range badRequests {
		want = append(want, f)
	}
	slices.Sort(files)
	slices.Sort(want)
	if diff := cmp.Diff(want, files); diff != "" {
		t.Fatalf("corpus and expectations differ (-expected +corpus):\n%s", diff)
	}
	// Old enough that no retry is due: rejected at once.
	old := time.Now().Add(-time.Hour)
	for f, b := range contents {
		if b == nil {
			continue // link.yaml and pipe.json, made above
		}
		p := filepath.Join(h.spool, f)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	h.once()
	for _, f := range files {
		_, name := runs.Classify(f)
		got := h.result(name)
		msg, _ := deref(got.ErrorMessage).(string)
		t.Logf("%s: %s", f, msg)
		if got.Status != result.StatusRejected || deref(got.ErrorCode) != result.ErrInvalidRequest {
			t.Errorf("%s: status %s errorCode %v, want rejected invalid_request", f, got.Status, deref(got.ErrorCode))
		}
		if strings.Contains(msg, "hunter2") {
			t.Errorf("%s: the message quotes a file the request links to", f)
		}
		if strings.Contains(msg, "badrequest-jwt") {
			t.Errorf("%s: the message quotes the run's JWT", f)
		}
		if !strings.Contains(msg, badRequests[f]) {
			t.Errorf("%s: message %q lacks %q", f, msg, badRequests[f])
		}
		if contents[f] == nil {
			continue
		}
		if b, err := os.ReadFile(filepath.Join(h.spool, f)); err != nil || !bytes.Equal(b, contents[f]) {
			t.Errorf("%s: the request was changed or removed", f)
		}
	}
	if n, _ := filepath.Glob(filepath.Join(h.rec, "*.start")); len(n) > 0 {
		t.Errorf("bad requests started agents: %v", n)
	}
}

// runRequestJSON is a valid request for acme/coder with fields replaced.
func runRequestJSON(t *testing.T, fields map[string]any) []byte {
	t.Helper()
	r := map[string]any{"apiVersion": "pcsync.io/v1alpha1", "kind": "Run", "company": "acme", "agent": "coder", "prompt": "hi"}
	maps.Copy(r, fields)
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
