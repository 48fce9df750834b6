package reconcile

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/pkg/apply"
	"github.com/pcsync/pcsync/pkg/config"
)

func suspendedCompany(slug string) string {
	return strings.Replace(company(slug), "  id: id-"+slug+"\n", "  id: id-"+slug+"\n  suspend: true\n", 1)
}

// TestSuspendedCompanyKeptAsItIs: a suspended company is neither rendered
// nor applied, and its tenant is handed over (never pruned, not counted
// by the guard), while the runs loop still gets it (to reject its new
// runs by name); resumed, it is applied again.
func TestSuspendedCompanyKeptAsItIs(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "acme.yaml"), company("acme"))
	write(t, filepath.Join(dir, "globex.yaml"), suspendedCompany("globex"))
	a := &optsApplier{}
	o := DefaultOptions(dir)
	o.Logger = slog.New(slog.DiscardHandler)
	var published []int
	o.OnModel = func(m *config.Model) { published = append(published, len(m.Companies)) }
	l, err := New(a, o)
	if err != nil {
		t.Fatal(err)
	}
	if out := l.ReconcileOnce(context.Background()); out.Err != nil {
		t.Fatal(out.Err)
	}
	write(t, filepath.Join(dir, "globex.yaml"), company("globex"))
	if out := l.ReconcileOnce(context.Background()); out.Err != nil {
		t.Fatal(out.Err)
	}
	want := []applyCall{
		{Namespaces: []string{"paperclip-acme"}, Handover: apply.Handover{Keep: []string{"paperclip-globex"}}},
		{Namespaces: []string{"paperclip-acme", "paperclip-globex"}},
	}
	if diff := cmp.Diff(want, a.calls); diff != "" {
		t.Errorf("applies (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{2, 2}, published); diff != "" {
		t.Errorf("companies of the models published (-want +got):\n%s", diff)
	}
}

// TestRevision: a config directory under a path element named by a Git
// commit (git-sync's worktree) is that commit; any other is a digest of
// its render, and without a render (an invalid config) none.
func TestRevision(t *testing.T) {
	sha1 := strings.Repeat("0123456789", 4)[:40]
	sha256 := strings.Repeat("abcdef0123", 7)[:64]
	digest := strings.Repeat("9f", 32)
	tests := []struct {
		name, dir, digest, want string
	}{
		{"git-sync v4 worktree", "/git/.worktrees/" + sha1, digest, sha1},
		{"a subdirectory of the checkout", "/git/.worktrees/" + sha1 + "/config/prod", digest, sha1},
		{"a SHA-256 repository", "/git/.worktrees/" + sha256, "", sha256},
		{"git-sync v3", "/tmp/git/rev-" + sha1, digest, sha1},
		{"no checkout", "/srv/config", digest, "sha256:9f9f9f9f9f9f9f9f"},
		{"no checkout, invalid", "/srv/config", "", ""},
		{"upper case is no hash", "/git/" + strings.ToUpper(sha256), digest, "sha256:9f9f9f9f9f9f9f9f"},
		{"too short", "/git/" + sha1[:39], digest, "sha256:9f9f9f9f9f9f9f9f"},
	}
	got := map[string]string{}
	want := map[string]string{}
	for _, tc := range tests {
		got[tc.name], want[tc.name] = revision(tc.dir, tc.digest), tc.want
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("revisions (-want +got):\n%s", diff)
	}
}

// TestOutcomeRevision: the loop names the config it loaded through the
// link git-sync swaps: the commit its worktree is named by.
func TestOutcomeRevision(t *testing.T) {
	root := t.TempDir()
	commit := strings.Repeat("c0ffee", 7)[:40]
	wt := filepath.Join(root, ".worktrees", commit)
	if err := os.MkdirAll(wt, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(wt, "acme.yaml"), company("acme"))
	if err := os.Symlink(filepath.Join(".worktrees", commit), filepath.Join(root, "config")); err != nil {
		t.Fatal(err)
	}
	o := DefaultOptions(filepath.Join(root, "config"))
	o.Logger = slog.New(slog.DiscardHandler)
	l, err := New(&optsApplier{}, o)
	if err != nil {
		t.Fatal(err)
	}
	if out := l.ReconcileOnce(context.Background()); out.Revision != commit {
		t.Errorf("revision %q, want the worktree's commit %s", out.Revision, commit)
	}
}
