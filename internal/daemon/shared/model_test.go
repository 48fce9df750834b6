package shared

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/pcsync/pcsync/internal/lib/podinformer"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/egressproxy/scale"
)

// TestSetModelGivesTheScalerItsIdlePeriods: before a config, no namespace
// is the scaler's; then each company in egress mode proxy has its idle
// period (its own, else the Settings'), one with a warm pool 0 (always
// up), and one in another egress mode none.
func TestSetModelGivesTheScalerItsIdlePeriods(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"settings.yaml": "apiVersion: pcsync.io/v1alpha1\nkind: Settings\nmetadata: {name: s}\nspec:\n  egress: {proxyIdleSec: 120}\n",
		"acme.yaml":     company("acme", ""),
		"globex.yaml":   company("globex", "  egress: {proxyIdleSec: 30}\n"),
		"initech.yaml":  company("initech", "  sandbox: {warmPool: [{adapterType: claude_local, count: 1}]}\n"),
		"umbrella.yaml": company("umbrella", "  egress: {mode: standard}\n"),
	}
	for n, b := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	m, err := config.Load(context.Background(), dir, config.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cs := fake.NewClientset()
	so := scale.DefaultOptions()
	s := &Shared{}
	so.Idle = s.idleFor
	if s.scale, err = scale.New(cs, podinformer.New(cs, podinformer.DefaultOptions()), so); err != nil {
		t.Fatal(err)
	}
	type idle struct {
		D  time.Duration
		OK bool
	}
	read := func() map[string]idle {
		out := map[string]idle{}
		for _, slug := range []string{"acme", "globex", "initech", "umbrella"} {
			d, ok := s.idleFor("paperclip-" + slug)
			out[slug] = idle{d, ok}
		}
		return out
	}
	before := read()
	s.SetModel(m)
	after := read()
	want := []map[string]idle{
		{"acme": {}, "globex": {}, "initech": {}, "umbrella": {}},
		{"acme": {2 * time.Minute, true}, "globex": {30 * time.Second, true}, "initech": {0, true}, "umbrella": {}},
	}
	if diff := cmp.Diff(want, []map[string]idle{before, after}); diff != "" {
		t.Errorf("idle periods before and after the config (-want +got):\n%s", diff)
	}
}

func company(slug, spec string) string {
	return "apiVersion: pcsync.io/v1alpha1\nkind: Company\nmetadata: {name: " + slug + "}\nspec:\n  id: " + slug + "-id\n" + spec +
		"  agents:\n    - {name: coder, adapter: claude_local}\n"
}
