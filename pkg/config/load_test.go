package config_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/pkg/config"
)

func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

const company = `apiVersion: pcsync.io/v1alpha1
kind: Company
metadata:
  name: %s
spec:
  id: id-%s
`

func companyDoc(slug string) string { return strings.ReplaceAll(company, "%s", slug) }

func TestLoadValid(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"b.yaml":               companyDoc("beta") + "---\n" + companyDoc("alpha"),
		"sub/c.yml":            companyDoc("gamma") + "  egress: {mode: standard}\n  agents:\n    - {name: coder, adapter: codex_local}\n",
		".hidden.yaml":         "not: [valid",
		".git/config.yaml":     "not: [valid",
		"notes.txt":            "not yaml at all: [",
		"settings.yaml":        "apiVersion: pcsync.io/v1alpha1\nkind: Settings\nmetadata: {name: s}\nspec:\n  namespacePrefix: t-\n",
		"empty.yaml":           "# nothing here\n",
		"only-separators.yaml": "---\n---\n",
	})
	m, err := config.Load(context.Background(), dir, config.DefaultLoadOptions())
	if err != nil {
		t.Fatal(err)
	}
	var slugs []string
	for i := range m.Companies {
		slugs = append(slugs, m.Companies[i].Slug())
	}
	if diff := cmp.Diff([]string{"alpha", "beta", "gamma"}, slugs); diff != "" {
		t.Errorf("companies (-want +got):\n%s", diff)
	}
	alpha, _ := m.Company("alpha")
	if got, want := alpha.Source, (config.Position{File: filepath.Join(dir, "b.yaml"), Line: 8, Column: 1}); got != want {
		t.Errorf("alpha source = %v, want %v (second document of the file)", got, want)
	}
	if got := m.Namespace(alpha); got != "t-alpha" {
		t.Errorf("namespace = %q, want t-alpha", got)
	}
	gamma, _ := m.Company("gamma")
	a := gamma.Spec.Agents[0]
	if a.Concurrency != 1 || a.GraceSec != 60 || a.TimeoutSec != 0 {
		t.Errorf("agent defaults = %+v", a)
	}
	if got := m.AgentImage(&a); got != "pcsync-agent-codex:dev" {
		t.Errorf("agent image = %q", got)
	}
	if got := *m.Quota(gamma).Pods; got != 20 {
		t.Errorf("quota pods = %d, want the default 20", got)
	}
	if len(m.Warnings) != 1 || !strings.Contains(m.Warnings[0].String(), `company "gamma": egress mode standard cannot enforce host names`) {
		t.Errorf("warnings = %v, want one for gamma", m.Warnings)
	}
}

func TestLoadDefaultsWithoutSettings(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a.yaml": companyDoc("acme")})
	m, err := config.Load(context.Background(), dir, config.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := m.Settings.Spec
	if s.NamespacePrefix != "paperclip-" || s.Server.Port != 3100 || s.Egress.Mode != config.EgressProxy {
		t.Errorf("default settings = %+v", s)
	}
	if len(m.Builtin) != 7 {
		t.Errorf("built-in adapters = %d, want 7", len(m.Builtin))
	}
}

func TestLoadNotADirectory(t *testing.T) {
	_, err := config.Load(context.Background(), filepath.Join(t.TempDir(), "missing"), config.LoadOptions{})
	var ce *config.Errors
	if err == nil || errors.As(err, &ce) {
		t.Fatalf("err = %v, want a plain (non-config) error", err)
	}
}

func TestLoadAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("a: &a [x, x, x, x, x, x, x, x, x, x]\n")
	prev := "a"
	for i := range 12 {
		name := string(rune('b' + i))
		b.WriteString(name + ": &" + name + " [*" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + "]\n")
		prev = name
	}
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"bomb.yaml": b.String()})
	// The expansion is refused by size before it is built; go test's
	// -timeout catches a loader that expands it anyway (speed is for
	// benchmarks, not timed assertions).
	_, err := config.Load(context.Background(), dir, config.LoadOptions{})
	var ce *config.Errors
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want *config.Errors", err)
	}
	if !strings.Contains(err.Error(), "too large") {
		t.Errorf("err = %v, want a size error", err)
	}
}

func TestLoadErrorsAreSortedAndComplete(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"a.yaml": companyDoc("acme") + "  colour: red\n  agents:\n    - {name: x, adapter: nope}\n",
		"b.yaml": "apiVersion: pcsync.io/v1alpha1\nkind: Company\nmetadata: {name: beta}\nspec: {}\n",
	})
	_, err := config.Load(context.Background(), dir, config.LoadOptions{})
	var ce *config.Errors
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v", err)
	}
	want := []string{
		filepath.Join(dir, "a.yaml") + `:7:3: spec.colour: field not allowed`,
		filepath.Join(dir, "a.yaml") + `:9:26: spec.agents[0].adapter: invalid value "nope": must be one of "acpx_local", "claude_local", "codex_local", "cursor_local", "gemini_local", "opencode_local", "pi_local"`,
		filepath.Join(dir, "b.yaml") + `:4:1: spec.id: field is required`,
	}
	if diff := cmp.Diff(want, ce.Lines()); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	if got := strings.Count(err.Error(), "\n"); got != 2 {
		t.Errorf("Error() has %d newlines, want 2", got)
	}
}

func TestPatchPathLoaded(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"tenants/acme.yaml":      companyDoc("acme") + "  patches:\n    - path: ../patches/p.yaml\n      target: {kind: ResourceQuota}\n",
		"patches/p.yaml":         "- op: remove\n  path: /spec/hard/pods\n",
		"patches/unrelated.yaml": "- this is not a config document",
	})
	_, err := config.Load(context.Background(), dir, config.LoadOptions{})
	if err == nil || !strings.Contains(err.Error(), "unrelated.yaml:1:1: a document must be a mapping") {
		t.Fatalf("err = %v, want only unrelated.yaml refused", err)
	}
	if strings.Contains(err.Error(), "p.yaml:") {
		t.Errorf("the patch file was read as config: %v", err)
	}
	os.Remove(filepath.Join(dir, "patches/unrelated.yaml"))
	m, err := config.Load(context.Background(), dir, config.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := m.Companies[0].Spec.Patches[0]
	if p.Patch != "- op: remove\n  path: /spec/hard/pods\n" || p.Path != filepath.Join(dir, "patches/p.yaml") {
		t.Errorf("patch = %+v", p)
	}
	if p.Source.Line != 8 || p.Source.Column != 7 {
		t.Errorf("patch source = %v, want line 8, column 7", p.Source)
	}
}

// TestLoadProtectedNamespaces: a company that renders to a namespace pcsync
// needs at run time is refused at its metadata.name, with what the namespace
// is; the other companies load.
func TestLoadProtectedNamespaces(t *testing.T) {
	tests := []struct {
		name      string
		protected map[string]string
		settings  string
		want      []string
	}{
		{name: "none", want: nil},
		{
			name:      "applyset parent",
			protected: map[string]string{"paperclip-ops": "the ApplySet parent's namespace (--applyset-namespace)"},
			want: []string{`companies.yaml:4:9: metadata.name: company "ops" renders to namespace "paperclip-ops", which is the ApplySet parent's namespace (--applyset-namespace): ` +
				`pcsync would restrict it and, on prune, delete it; rename the company or change Settings spec.namespacePrefix`},
		},
		{
			name: "pcsync's own, from Settings",
			settings: "apiVersion: pcsync.io/v1alpha1\nkind: Settings\nmetadata: {name: fleet}\n" +
				"spec: {pcsync: {serviceAccount: {namespace: paperclip-ops, name: pcsync}}}\n",
			want: []string{`companies.yaml:4:9: metadata.name: company "ops" renders to namespace "paperclip-ops", where pcsync itself runs (Settings spec.pcsync.serviceAccount.namespace): ` +
				`pcsync would restrict it and, on prune, delete it; rename the company or change Settings spec.namespacePrefix`},
		},
		{
			name:      "unrelated",
			protected: map[string]string{"pcsync-system": "the namespace pcsync runs in"},
			want:      nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			files := map[string]string{"companies.yaml": companyDoc("ops") + "---\n" + companyDoc("acme")}
			if tt.settings != "" {
				files["settings.yaml"] = tt.settings
			}
			writeFiles(t, dir, files)
			opts := config.DefaultLoadOptions()
			opts.ProtectedNamespaces = tt.protected
			_, err := config.Load(context.Background(), dir, opts)
			var got []string
			if ce := (*config.Errors)(nil); errors.As(err, &ce) {
				for _, l := range ce.Lines() {
					got = append(got, strings.TrimPrefix(l, dir+string(filepath.Separator)))
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLoadPrivateCIDRWarning: a company that sets allowPrivateCidrs loads
// with a warning at that field, naming the entries it lets through, or
// saying that none needs it.
func TestLoadPrivateCIDRWarning(t *testing.T) {
	tests := []struct {
		name   string
		egress string
		want   []string
	}{
		{"public only", "{allowCidrs: [203.0.113.0/24]}", nil},
		{"opt-in used", "{allowPrivateCidrs: true, allowCidrs: [0.0.0.0/0, 203.0.113.0/24, {cidr: 10.40.0.0/16, ports: [5432]}]}",
			[]string{`acme.yaml:7:12: spec.egress.allowPrivateCidrs: company "acme": allowPrivateCidrs lets its agents reach 0.0.0.0/0, 10.40.0.0/16 directly, ` +
				`where a cluster's pods, nodes, services or metadata service may answer`}},
		{"opt-in unused", "{allowPrivateCidrs: true, allowCidrs: [203.0.113.0/24]}",
			[]string{`acme.yaml:7:12: spec.egress.allowPrivateCidrs: company "acme": allowPrivateCidrs is set, but no allowCidrs entry needs it: remove it`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{"acme.yaml": companyDoc("acme") + "  egress: " + tt.egress + "\n"})
			m, err := config.Load(context.Background(), dir, config.DefaultLoadOptions())
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, w := range m.Warnings {
				got = append(got, strings.TrimPrefix(w.String(), dir+string(filepath.Separator)))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}
