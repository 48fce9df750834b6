// Package sandboxtest holds the configs that the tests of pkg/sandbox's
// packages share.
package sandboxtest

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/pcsync/pcsync/pkg/config"
)

// SchedModel is a company with a runtime class and agents with and
// without scheduling of their own.
func SchedModel(t *testing.T) *config.Model {
	t.Helper()
	files := map[string]string{
		"settings.yaml": `apiVersion: pcsync.io/v1alpha1
kind: Settings
metadata: {name: s}
spec: {}
`,
		"acme.yaml": `apiVersion: pcsync.io/v1alpha1
kind: Company
metadata: {name: acme}
spec:
  id: acme-id
  runtimeClassName: gvisor
  agents:
    - name: pinned
      adapter: claude_local
      nodeSelector: {pool: agents, topology.kubernetes.io/zone: eu-west-1a}
      tolerations:
        - {key: dedicated, operator: Equal, value: agents, effect: NoSchedule}
        - {key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: 60}
    - name: zoned
      adapter: codex_local
      nodeSelector: {topology.kubernetes.io/zone: eu-west-1b}
    - name: free
      adapter: claude_local
`,
	}
	return LoadModel(t, files)
}

// LoadModel loads the config of files (name → YAML) from a temporary
// directory.
func LoadModel(t *testing.T, files map[string]string) *config.Model {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m, err := config.Load(context.Background(), dir, config.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}
