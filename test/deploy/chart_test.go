package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/pcsync/pcsync/pkg/images"
)

// chartDir is charts/pcsync, from this package's directory.
const chartDir = "../../charts/pcsync"

// TestChartIsTheRelease: charts/pcsync is the release's chart: its
// appVersion is the release version (pkg/images/version.go), the default
// tag of pcsync's image, and its version the same without the v (Helm's
// SemVer).
func TestChartIsTheRelease(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var chart struct {
		APIVersion string `json:"apiVersion"`
		Name       string `json:"name"`
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(data, &chart); err != nil {
		t.Fatalf("Chart.yaml: %v", err)
	}
	want := chart
	want.APIVersion, want.Name = "v2", "pcsync"
	want.Version, want.AppVersion = strings.TrimPrefix(images.Version, "v"), images.Version
	if diff := cmp.Diff(want, chart); diff != "" {
		t.Errorf("charts/pcsync/Chart.yaml (-want +got):\n%s", diff)
	}
}
