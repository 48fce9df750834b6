package spool

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestPrepare: a missing spool whose parent exists is created with its
// state directory, mode 0700; a spool that is a file, or whose parent is
// missing too, is refused, naming it; an existing spool is left as it is.
func TestPrepare(t *testing.T) {
	root := t.TempDir()
	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	existing := filepath.Join(root, "existing")
	if err := os.Mkdir(existing, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(existing, 0o755); err != nil { // whatever the umask
		t.Fatal(err)
	}
	orphan := filepath.Join(root, "gone", "spool")
	tests := []struct {
		name, spool string
		wantErr     string
		wantMode    os.FileMode
	}{
		{"missing, parent exists", filepath.Join(root, "new"), "", os.ModeDir | 0o700},
		{"existing", existing, "", os.ModeDir | 0o755},
		{"parent missing", orphan, "spool " + orphan + ": missing, and so is its parent directory " + filepath.Dir(orphan) +
			" (create it, or fix --spool): mkdir " + orphan + ": no such file or directory", 0},
		{"a file", file, "spool " + file + ": not a directory", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Prepare(DefaultOptions(tt.spool))
			var mode, stateMode os.FileMode
			if err == nil {
				mode, stateMode = fileMode(t, tt.spool), fileMode(t, filepath.Join(tt.spool, ".pcsync"))
			}
			var wantState os.FileMode
			if tt.wantErr == "" {
				wantState = os.ModeDir | 0o700
			}
			got := []any{errString(err), mode, stateMode}
			if diff := cmp.Diff([]any{tt.wantErr, tt.wantMode, wantState}, got); diff != "" {
				t.Errorf("error, the spool's mode, the state directory's mode (-want +got):\n%s", diff)
			}
		})
	}
}

func fileMode(t *testing.T, p string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode()
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
