package main

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCurrent fails when schema/adapter_types.cue is not what genadapters
// writes from pkg/adapters: run `go generate ./schema`.
func TestCurrent(t *testing.T) {
	got, err := os.ReadFile("../../schema/adapter_types.cue")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(generate()), string(got)); diff != "" {
		t.Errorf("schema/adapter_types.cue is stale; run `go generate ./schema` (-generated +committed):\n%s", diff)
	}
}
