package main

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCurrent fails when docs/metrics-reference.md is not what genmetrics
// writes from the metrics' registrations and deploy/monitoring's
// PrometheusRule: run `make docs`.
func TestCurrent(t *testing.T) {
	want, err := generate("../..")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../docs/metrics-reference.md")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("docs/metrics-reference.md is stale; run `make docs` (-generated +committed):\n%s", diff)
	}
}
