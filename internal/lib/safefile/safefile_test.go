package safefile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// hostile builds one file of each kind that a spool's writer can leave.
func hostile(t *testing.T) (dir, outside string) {
	t.Helper()
	dir = t.TempDir()
	outside = filepath.Join(t.TempDir(), "outside")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(outside, []byte("outside\n"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "regular"), []byte(`{"a":1}`), 0o644))
	must(os.WriteFile(filepath.Join(dir, "big"), make([]byte, 2048), 0o644))
	must(os.Symlink(outside, filepath.Join(dir, "symlink")))
	must(os.Symlink("/dev/zero", filepath.Join(dir, "zero")))
	must(os.Link(outside, filepath.Join(dir, "hardlink")))
	must(syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644))
	must(os.Mkdir(filepath.Join(dir, "dir"), 0o755))
	return dir, outside
}

// TestReadRefusesWhatIsNotARegularFile: reads never follow a link, never
// wait on a FIFO, never read a device or more than the limit.
func TestReadRefusesWhatIsNotARegularFile(t *testing.T) {
	dir, _ := hostile(t)
	tests := []struct {
		name, want string
	}{
		{"regular", ""},
		{"symlink", "not a regular file: a symbolic link"},
		{"zero", "not a regular file: a symbolic link"},
		{"hardlink", "has 2 hard links"},
		{"fifo", "not a regular file: a named pipe"},
		{"dir", "not a regular file: a directory"},
		{"big", "file too large"},
		{"missing", "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v map[string]int
			ok, err := ReadJSON(filepath.Join(dir, tt.name), 1024, &v)
			switch {
			case tt.want == "" && (err != nil || !ok):
				t.Fatalf("ReadJSON: %v, %v", ok, err)
			case tt.name == "missing" && (err != nil || ok):
				t.Fatalf("ReadJSON of a missing file: %v, %v; want not ok, no error", ok, err)
			case tt.want != "" && tt.name != "missing" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("ReadJSON: %v; want an error with %q", err, tt.want)
			}
			if _, err := ReadFile(filepath.Join(dir, tt.name), 1024); (err == nil) != (tt.want == "") {
				t.Errorf("ReadFile: %v", err)
			}
		})
	}
}

// TestOpenWriteRefusesWhatIsNotARegularFile: a write never goes through a
// link or into a FIFO, and never truncates what it refuses.
func TestOpenWriteRefusesWhatIsNotARegularFile(t *testing.T) {
	for _, mode := range []WriteMode{Append, Truncate, ReadWrite, Exclusive} {
		dir, outside := hostile(t)
		for _, name := range []string{"symlink", "zero", "hardlink", "fifo", "dir"} {
			f, err := OpenWrite(filepath.Join(dir, name), mode, 0o600)
			if err == nil {
				f.Close()
				t.Errorf("mode %d: OpenWrite(%s) succeeded", mode, name)
				continue
			}
			if mode != Exclusive && !errors.Is(err, ErrUnsafe) {
				t.Errorf("mode %d: OpenWrite(%s): %v, want ErrUnsafe", mode, name, err)
			}
			if mode == Exclusive && !errors.Is(err, fs.ErrExist) {
				t.Errorf("mode %d: OpenWrite(%s): %v, want ErrExist", mode, name, err)
			}
		}
		if data, _ := os.ReadFile(outside); string(data) != "outside\n" {
			t.Errorf("mode %d: the outside file was changed: %q", mode, data)
		}
		// A new file and a regular one are 0600, whatever they were.
		for _, name := range []string{"regular", "new"} {
			if mode == Exclusive && name == "regular" {
				continue
			}
			f, err := OpenWrite(filepath.Join(dir, name), mode, 0o600)
			if err != nil {
				t.Fatalf("mode %d: OpenWrite(%s): %v", mode, name, err)
			}
			fi, _ := f.Stat()
			f.Close()
			if fi.Mode().Perm() != 0o600 {
				t.Errorf("mode %d: %s is %v, want 0600", mode, name, fi.Mode().Perm())
			}
		}
	}
}

// TestWriteAtomicReplacesALinkNotItsTarget: the rename replaces the name;
// the file a symbolic link pointed at is untouched.
func TestWriteAtomicReplacesALinkNotItsTarget(t *testing.T) {
	dir, outside := hostile(t)
	p := filepath.Join(dir, "symlink")
	if err := WriteAtomic(p, []byte("new\n"), 0o600, true); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(outside); string(data) != "outside\n" {
		t.Errorf("the outside file was changed: %q", data)
	}
	fi, err := os.Lstat(p)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
		t.Errorf("after WriteAtomic: %v %v, want a regular file 0600", fi.Mode(), err)
	}
}
