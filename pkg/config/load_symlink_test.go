package config

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A config directory given as a symbolic link (git-sync swaps such a link to
// each new worktree) is read through the link, and errors name files under
// the path the user gave.
func TestLoadThroughSymlinkedDirectory(t *testing.T) {
	tmp := t.TempDir()
	worktree := filepath.Join(tmp, "rev-1")
	if err := os.MkdirAll(worktree, 0o755); err != nil {
		t.Fatal(err)
	}
	company := "apiVersion: pcsync.io/v1alpha1\nkind: Company\nmetadata: {name: acme}\nspec: {id: c-1}\n"
	if err := os.WriteFile(filepath.Join(worktree, "acme.yaml"), []byte(company), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(tmp, "config")
	if err := os.Symlink("rev-1", link); err != nil {
		t.Fatal(err)
	}
	m, err := Load(context.Background(), link, DefaultLoadOptions())
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Companies) != 1 || m.Companies[0].Slug() != "acme" {
		t.Fatalf("companies = %+v, want acme read through the link", m.Companies)
	}

	bad := "apiVersion: pcsync.io/v1alpha1\nkind: Company\nmetadata: {name: globex}\nspec: {}\n"
	if err := os.WriteFile(filepath.Join(worktree, "globex.yaml"), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Load(context.Background(), link, DefaultLoadOptions())
	var errs *Errors
	if !errors.As(err, &errs) {
		t.Fatalf("Load error = %v, want *Errors", err)
	}
	want := filepath.Join(link, "globex.yaml") + ":"
	if !strings.HasPrefix(errs.Error(), want) {
		t.Errorf("error %q does not name the file under the given path %q", errs.Error(), want)
	}
}
