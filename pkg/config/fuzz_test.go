package config_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/pcsync/pcsync/pkg/config"
)

// FuzzLoad feeds arbitrary bytes to the loader as a config file: no input
// may panic, and every input gives either a valid model or *config.Errors
// whose every error has a file, a line and a column.
//
//	go test ./pkg/config -run '^$' -fuzz FuzzLoad -fuzztime 1m
func FuzzLoad(f *testing.F) {
	for _, seed := range []string{
		companyDoc("acme"),
		companyDoc("acme") + "---\n" + companyDoc("beta") + "  agents: [{name: a, adapter: claude_local, env: {X: y}}]\n",
		"apiVersion: pcsync.io/v1alpha1\nkind: Settings\nmetadata: {name: s}\nspec: {egress: {mode: cilium}, images: {allowList: ['a/*']}}\n",
		"a: &a [x, *a]\n",
		"a: &a {b: 1}\nc: {<<: *a, d: 2}\n",
		"kind: Company\napiVersion: pcsync.io/v1alpha1\nspec: {egress: {allowCidrs: [10.0.0.1/8, {cidr: x}]}}\n",
		"{\"json\": true}",
		"\xff\xfe",
		"- [",
		"? complex\n: key\n",
		"!!binary aGVsbG8=",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "fuzz.yaml"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := config.Load(context.Background(), dir, config.LoadOptions{Concurrency: 1, MaxNodes: 10000})
		if err == nil {
			if m == nil {
				t.Fatal("nil model without error")
			}
			return
		}
		var ce *config.Errors
		if !errors.As(err, &ce) {
			t.Fatalf("error is not *config.Errors: %v", err)
		}
		if len(ce.List) == 0 {
			t.Fatal("empty error list")
		}
		for _, e := range ce.List {
			if e.Pos.File == "" || e.Pos.Line < 1 || e.Pos.Column < 1 || e.Message == "" {
				t.Errorf("unpositioned error: %#v", e)
			}
		}
		if _, err := config.ParseRun("fuzz.yaml", data); err != nil && !errors.As(err, &ce) {
			t.Errorf("ParseRun error is not *config.Errors: %v", err)
		}
	})
}
