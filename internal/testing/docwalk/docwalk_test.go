package docwalk

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const doc = "# Top\n\n## Walk\n\nText.\n\n```sh\necho one\n```\n\n1. Step:\n\n   ```sh\n   echo two\n   ```\n\n### Sub\n\n```sh\necho three\n```\n\n```yaml\nnot: shell\n```\n\n## Next\n\n```sh\necho four\n```\n"

// A section's shell blocks, its subsections' included and indented ones
// unindented, end at the next heading of its level; Script checks their
// number and each substitution.
func TestScript(t *testing.T) {
	path := filepath.Join(t.TempDir(), "doc.md")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	blocks, err := ShellBlocks(path, "## Walk")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"echo one\n", "echo two\n", "echo three\n"}, blocks); d != "" {
		t.Errorf("blocks (-want +got):\n%s", d)
	}
	tests := []struct {
		name, heading string
		n             int
		subs          [][2]string
		want, wantErr string
	}{
		{name: "substituted", heading: "## Walk", n: 3, subs: [][2]string{{"two", "2"}}, want: "echo one\necho 2\necho three\n"},
		{name: "count", heading: "## Walk", n: 2, wantErr: "has 3 shell blocks, want 2"},
		{name: "gone", heading: "## Walk", n: 3, subs: [][2]string{{"five", "5"}}, wantErr: `no longer says "five"`},
		{name: "no heading", heading: "## Missing", n: 1, wantErr: `has no heading "## Missing"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Script(path, tt.heading, tt.n, tt.subs)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("Script = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// Run stops at the first failing line, as the reader's shell would, and
// stop ends what the script left running.
// TestSections: the blocks of several sections, in the order given, with
// the values put in across them; a section's count and a value that none
// says fail.
func TestSections(t *testing.T) {
	path := filepath.Join(t.TempDir(), "doc.md")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Sections(path, []Section{{Heading: "## Next", Blocks: 1}, {Heading: "### Sub", Blocks: 1}}, [][2]string{{"four", "4"}, {"three", "3"}})
	if err != nil || got != "echo 4\necho 3\n" {
		t.Errorf("Sections = %q, %v; want the two sections' blocks, in that order, with 4 and 3", got, err)
	}
	if _, err := Sections(path, []Section{{Heading: "## Next", Blocks: 2}}, nil); err == nil || !strings.Contains(err.Error(), "has 1 shell blocks, want 2") {
		t.Errorf("error %v, want the count's", err)
	}
	if _, err := Sections(path, []Section{{Heading: "## Next", Blocks: 1}, {Heading: "### Sub", Blocks: 1}}, [][2]string{{"five", "5"}}); err == nil ||
		!strings.Contains(err.Error(), `"## Next" to "### Sub" no longer says "five"`) {
		t.Errorf("error %v, want the substitution's, naming both ends", err)
	}
}

func TestRun(t *testing.T) {
	ctx := context.Background()
	out, stop, err := Run(ctx, t.TempDir(), "echo one\nfalse\necho two\n", nil)
	stop(0)
	if err == nil || out != "one\n" {
		t.Errorf("Run = %q, %v; want one line and the failure", out, err)
	}
	dir := t.TempDir()
	out, stop, err = Run(ctx, dir, "sleep 60 >/dev/null 2>&1 & echo $! > bg.pid\necho \"$WHO\"\n", []string{"WHO=reader"})
	if err != nil || out != "reader\n" {
		t.Fatalf("Run = %q, %v; want the env's value", out, err)
	}
	pidData, err := os.ReadFile(filepath.Join(dir, "bg.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(pidData)))
	stop(0)
	for range 100 {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("the background process %d outlived stop", pid)
}
