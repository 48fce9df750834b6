//go:build integration

package monitoring

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// tool returns the path of a tool hack/monitoring/install.sh installs, and
// fails the test (never skips it) when it is missing.
func tool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found: run `bash hack/monitoring/install.sh` (as root: Debian's prometheus package; make test does)", name)
	}
	return p
}

// TestRulesPromtool: `promtool check rules` accepts rules.yaml, and
// `promtool test rules` passes rules_test.yaml, whose cases make every alert
// fire and keep it quiet when it should be.
func TestRulesPromtool(t *testing.T) {
	promtool := tool(t, "promtool")
	for _, args := range [][]string{
		{"check", "rules", filepath.Join(monitoringDir, "rules.yaml")},
		{"test", "rules", "rules_test.yaml"},
	} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	// Every alert has at least one case that fires it and one that keeps
	// it quiet (an eval with no exp_alerts).
	data, err := os.ReadFile("rules_test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range wantAlerts {
		fires, quiet := 0, 0
		lines := strings.Split(string(data), "\n")
		for i, l := range lines {
			if strings.TrimSpace(l) != "alertname: "+a {
				continue
			}
			if i+1 < len(lines) && strings.TrimSpace(lines[i+1]) == "exp_alerts:" {
				fires++
			} else {
				quiet++
			}
		}
		if fires == 0 || quiet == 0 {
			t.Errorf("rules_test.yaml: %s has %d cases that fire it and %d that keep it quiet; want one of each at least", a, fires, quiet)
		}
	}
}
