package main

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCurrent fails when docs/config-reference.md is not what gendocs
// writes from the schema: run `go run ./hack/gendocs`.
func TestCurrent(t *testing.T) {
	want, err := generate()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../docs/config-reference.md")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("docs/config-reference.md is stale; run `go run ./hack/gendocs` (-generated +committed):\n%s", diff)
	}
}
