// Package configtest writes synthetic config directories for tests and
// benchmarks.
package configtest

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// FleetOptions shape a synthetic fleet.
type FleetOptions struct {
	// Companies is how many Company documents to write.
	Companies int
	// AgentsPerCompany is how many agents each company has; 0 means 2.
	AgentsPerCompany int
	// Cilium selects egress mode cilium in Settings.
	Cilium bool
	// Mode, when set, is the Settings' egress mode (standard, proxy,
	// cilium); it wins over Cilium.
	Mode string
	// NamespacePrefix, when set, is the Settings' namespacePrefix: fleets
	// side by side on one cluster keep apart so.
	NamespacePrefix string
	// ProxyIdleSec, when set, is the Settings' spec.egress.proxyIdleSec.
	ProxyIdleSec *int
	// Concurrency, when set, is each agent's concurrency.
	Concurrency int
}

// adapters are cycled through for the agents.
var adapters = []string{"claude_local", "codex_local", "gemini_local", "opencode_local"}

// WriteFleet writes a Settings file and one file per company under dir,
// each company with its own CIDR, host names and agents.
func WriteFleet(dir string, o FleetOptions) error {
	if o.AgentsPerCompany <= 0 {
		o.AgentsPerCompany = 2
	}
	mode := "standard"
	if o.Cilium {
		mode = "cilium"
	}
	mode = cmp.Or(o.Mode, mode)
	prefix := ""
	if o.NamespacePrefix != "" {
		prefix = "\n  namespacePrefix: " + o.NamespacePrefix
	}
	idle := ""
	if o.ProxyIdleSec != nil {
		idle = fmt.Sprintf("\n    proxyIdleSec: %d", *o.ProxyIdleSec)
	}
	settings := fmt.Sprintf(`apiVersion: pcsync.io/v1alpha1
kind: Settings
metadata:
  name: fleet
spec:%s
  egress:
    mode: %s%s
  images:
    allowList: ["registry.example.com/agents/*"]
`, prefix, mode, idle)
	if err := os.MkdirAll(filepath.Join(dir, "companies"), 0o755); err != nil {
		return fmt.Errorf("fleet: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "settings.yaml"), []byte(settings), 0o644); err != nil {
		return fmt.Errorf("fleet: %w", err)
	}
	for i := range o.Companies {
		var b strings.Builder
		fmt.Fprintf(&b, `apiVersion: pcsync.io/v1alpha1
kind: Company
metadata:
  name: company-%04d
  labels:
    team: team-%d
spec:
  id: c-%04d
  egress:
    allowFqdns: [github.com, "git-%d.example.com"]
    allowCidrs: ["11.%d.%d.0/24"]
  serviceAccountAnnotations:
    eks.amazonaws.com/role-arn: arn:aws:iam::123456789012:role/company-%04d
  agents:
`, i, i%10, i, i, (i/256)%256, i%256, i)
		for j := range o.AgentsPerCompany {
			fmt.Fprintf(&b, `    - name: agent-%d
      adapter: %s
      model: model-%d
      env:
        LOG_LEVEL: info
`, j, adapters[(i+j)%len(adapters)], j)
			if o.Concurrency > 0 {
				fmt.Fprintf(&b, "      concurrency: %d\n", o.Concurrency)
			}
		}
		name := filepath.Join(dir, "companies", fmt.Sprintf("company-%04d.yaml", i))
		if err := os.WriteFile(name, []byte(b.String()), 0o644); err != nil {
			return fmt.Errorf("fleet: %w", err)
		}
	}
	return nil
}

// CPUMeter reports a benchmark's process CPU time per operation as the
// metric "cpu-ns/op". Start it right before the timed loop and call Stop
// right after it.
type CPUMeter struct{ start time.Duration }

// StartCPU starts a CPUMeter.
func StartCPU() CPUMeter { return CPUMeter{start: ProcessCPU()} }

// Stop reports the CPU time used since StartCPU per iteration of b.
func (m CPUMeter) Stop(b *testing.B) {
	if b.N > 0 {
		b.ReportMetric(float64(ProcessCPU()-m.start)/float64(b.N), "cpu-ns/op")
	}
}
