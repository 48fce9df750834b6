package main

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCurrent fails when the plugin's src/defaults.js is not what
// gensandbox writes from pkg/sandbox: run `go generate ./pkg/sandbox`.
func TestCurrent(t *testing.T) {
	got, err := os.ReadFile("../../integrations/paperclip-sandbox/src/defaults.js")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(generate()), string(got)); diff != "" {
		t.Errorf("integrations/paperclip-sandbox/src/defaults.js is stale; run `go generate ./pkg/sandbox` (-generated +committed):\n%s", diff)
	}
}
