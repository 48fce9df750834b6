package spool

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/result"
	"github.com/pcsync/pcsync/pkg/runs"
)

// FuzzSpoolRequest feeds arbitrary bytes through the request path the
// daemon owns (ParseRequest: schema, config, run id, adapter command line)
// and the rejected result it writes: it never panics, and every input is
// either a valid run or a rejection with a message that makes a result
// file.
func FuzzSpoolRequest(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/badrequests/*")
	for _, p := range seeds {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b, filepath.Ext(p) == ".json")
		}
	}
	f.Add([]byte(request("coder", "context: {taskId: T-1}\nsessionId: abc\ntimeoutSec: 5\n")), false)
	f.Add([]byte(`{"apiVersion":"pcsync.io/v1alpha1","kind":"Run","company":"acme","agent":"coder","prompt":"p","runId":"r-1"}`), true)
	f.Add([]byte("a: &a [*a]\n"), false)

	dir := f.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "fleet.yaml"), []byte(`apiVersion: pcsync.io/v1alpha1
kind: Company
metadata: {name: acme}
spec:
  id: co-1
  agents:
  - {name: coder, adapter: claude_local}
  - {name: other, adapter: codex_local, timeoutSec: 30}
`), 0o644); err != nil {
		f.Fatal(err)
	}
	m, err := config.Load(context.Background(), dir, config.LoadOptions{})
	if err != nil {
		f.Fatal(err)
	}
	out := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte, isJSON bool) {
		file := "fuzz.yaml"
		if isJSON {
			file = "fuzz.json"
		}
		paths := runs.Paths{Spool: out, Name: "fuzz"}
		run, err := runs.ParseRequest(m, paths, file, data)
		if err != nil {
			var rej *runs.Rejection
			if !errors.As(err, &rej) || rej.Message == "" {
				t.Fatalf("error %v is not a rejection with a message", err)
			}
			res := result.New(rej.RunID, rej.Company, rej.Agent, rej.Adapter)
			res.Fail(result.StatusRejected, result.ErrInvalidRequest, rej.Message)
			p := filepath.Join(out, "fuzz.result.json")
			os.Remove(p)
			if err := result.Write(p, res); err != nil {
				t.Fatalf("rejected result cannot be written: %v", err)
			}
			if back, err := result.Read(p); err != nil || back.Status != result.StatusRejected {
				t.Fatalf("rejected result does not read back: %v", err)
			}
			return
		}
		if !runs.IsDNSLabel(run.RunID) {
			t.Fatalf("accepted run id %q is not DNS-safe", run.RunID)
		}
		if _, ok := m.Company(run.Company.Slug()); !ok {
			t.Fatalf("accepted company %q is not in the config", run.Company.Slug())
		}
		if n := len(run.Request.Prompt); n == 0 || n > 1<<20 {
			t.Fatalf("accepted prompt of %d bytes", n)
		}
		if run.Timeout <= 0 {
			t.Fatalf("accepted run without a deadline")
		}
		if _, err := run.Adapter.Command(run.Invocation); err != nil {
			t.Fatalf("accepted run has no command line: %v", err)
		}
	})
}
