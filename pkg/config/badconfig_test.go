package config_test

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/internal/testing/golden"
	"github.com/pcsync/pcsync/pkg/config"
)

// update rewrites testdata/badconfig/*/errors.txt with the full lines.
var update = flag.Bool("update", false, "rewrite testdata/badconfig/*/errors.txt")

const badRoot = "../../testdata/badconfig"

// TestBadConfig loads each testdata/badconfig/<case>/config and checks
// that it is refused with exactly the errors of errors.txt: one line per
// error, "path:line:col: field.path: message-fragment", path relative to
// the case directory, sorted as Load sorts them.
func TestBadConfig(t *testing.T) {
	golden.Cases(t, badRoot, func(t *testing.T, dir string) {
		_, err := config.Load(context.Background(), filepath.Join(dir, "config"), config.LoadOptions{})
		var ce *config.Errors
		if !errors.As(err, &ce) {
			t.Fatalf("Load = %v, want *config.Errors", err)
		}
		prefix := dir + string(filepath.Separator)
		goldenPath := filepath.Join(dir, "errors.txt")
		if *update {
			var b strings.Builder
			for _, e := range ce.List {
				b.WriteString(strings.TrimPrefix(e.Error(), prefix) + "\n")
			}
			if err := os.WriteFile(goldenPath, []byte(b.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		data, err := os.ReadFile(goldenPath)
		if err != nil {
			t.Fatal(err)
		}
		want := strings.Split(strings.TrimSpace(string(data)), "\n")
		got := make([]string, len(ce.List))
		for i, e := range ce.List {
			got[i] = strings.TrimPrefix(e.Error(), prefix)
		}
		if len(want) != len(got) {
			t.Fatalf("got %d errors, want %d (-want +got):\n%s", len(got), len(want), cmp.Diff(want, got))
		}
		for i, e := range ce.List {
			if !matches(want[i], e, prefix) {
				t.Errorf("error %d:\n got  %s\n want %s", i, got[i], want[i])
			}
		}
	})
}

// matches reports whether an error fits an expected line: the same
// position and field, and a message that contains the line's fragment.
func matches(line string, e *config.Error, prefix string) bool {
	pos := strings.TrimPrefix(e.Pos.String(), prefix) + ": "
	rest, ok := strings.CutPrefix(line, pos)
	if !ok {
		return false
	}
	if e.Field != "" {
		if rest, ok = strings.CutPrefix(rest, e.Field+": "); !ok {
			return false
		}
	}
	return strings.Contains(e.Message, rest)
}
