package config

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestEveryPatternHasItsMessage fails when a regular expression of the
// schema (=~ in schema/*.cue) has no English in patterns: its users would
// read "must match <regex>".
func TestEveryPatternHasItsMessage(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "schema", "*.cue"))
	if err != nil || len(files) == 0 {
		t.Fatalf("schema files: %v (%d)", err, len(files))
	}
	re := regexp.MustCompile(`=~("(?:[^"\\]|\\.)*")`)
	seen := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(data), -1) {
			seen++
			// describeBound sees the constraint as CUE prints it: =~ and the
			// quoted literal, as written in the schema.
			if got := describeBound("=~" + m[1]); strings.HasPrefix(got, "must match ") {
				t.Errorf("%s: pattern %s has no message in messages.go's patterns", filepath.Base(f), m[1])
			}
		}
	}
	if seen < 10 {
		t.Errorf("found %d patterns in the schema; the scan is broken", seen)
	}
}
