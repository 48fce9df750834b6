package adapters

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const fuzzSecret = "s3cr3t-v4lue-xyz"

// fuzzParser seeds a fuzz target with the adapter's fixtures (and the
// repository's agent transcripts in testdata/agent-samples) and checks, for any input: no panic, the
// outcome invariants, the same outcome whether lines arrive through
// FeedLines or a LineWriter in odd chunks, and no secret in the message.
func fuzzParser(f *testing.F, typ Type) {
	dir := strings.TrimSuffix(string(typ), "_local")
	seeds, _ := filepath.Glob(filepath.Join("testdata", dir, "*.jsonl"))
	more, _ := filepath.Glob(filepath.Join(samplesDir, dir+"-*.jsonl"))
	seeds = append(seeds, more...)
	for _, s := range seeds {
		data, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		if len(data) > 64<<10 {
			// Mutating huge inputs slows fuzzing to a crawl; the parse
			// tests cover the big transcripts.
			continue
		}
		f.Add(data, 0, "")
		f.Add(data, 1, "Error: proxy said "+fuzzSecret)
	}
	f.Add([]byte("{\"type\":\"result\"}\n{"), -1, "")
	a, err := Get(typ)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte, code int, stderr string) {
		proc := ProcessOutcome{Stderr: stderr}
		switch {
		case code < 0:
			proc.Signal = "SIGKILL"
			proc.TimedOut = code == -2
		default:
			proc.ExitCode = &code
		}
		opts := ParserOptions{ResumedSessionID: "s-1", PreviousUsage: usage(5, 5, 0, 5), Secrets: []string{fuzzSecret}}

		p1 := a.NewParser(opts)
		if err := FeedLines(p1, bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
		o1 := p1.Finish(proc)
		checkInvariants(t, string(typ), o1)
		if o1.ErrorMessage != nil && strings.Contains(*o1.ErrorMessage, fuzzSecret) {
			t.Errorf("error message %q contains the secret", *o1.ErrorMessage)
		}

		p2 := a.NewParser(opts)
		w := NewLineWriter(p2)
		for rest := data; len(rest) > 0; {
			n := min(len(rest), 7)
			_, _ = w.Write(rest[:n])
			rest = rest[n:]
		}
		_ = w.Close()
		if diff := cmp.Diff(o1, p2.Finish(proc)); diff != "" {
			t.Errorf("FeedLines and LineWriter disagree (-feed +writer):\n%s", diff)
		}
	})
}

func FuzzParseClaude(f *testing.F)   { fuzzParser(f, ClaudeLocal) }
func FuzzParseCodex(f *testing.F)    { fuzzParser(f, CodexLocal) }
func FuzzParseGemini(f *testing.F)   { fuzzParser(f, GeminiLocal) }
func FuzzParseCursor(f *testing.F)   { fuzzParser(f, CursorLocal) }
func FuzzParseOpencode(f *testing.F) { fuzzParser(f, OpencodeLocal) }
func FuzzParsePi(f *testing.F)       { fuzzParser(f, PiLocal) }
func FuzzParseAcpx(f *testing.F)     { fuzzParser(f, AcpxLocal) }
