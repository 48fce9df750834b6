package result

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/pcsync/pcsync/internal/lib/safefile"
)

// Suffix is appended to a request's base name to form its result file name.
const Suffix = ".result.json"

// PathFor returns the result path of a request file: "dir/x.json" and
// "dir/x.yaml" both give "dir/x.result.json".
func PathFor(requestPath string) string {
	dir, base := filepath.Split(requestPath)
	return filepath.Join(dir, strings.TrimSuffix(base, filepath.Ext(base))+Suffix)
}

// MaxBytes is the most Read reads of a result file; a larger one is not a
// result pcsync wrote.
const MaxBytes = 8 << 20

// ErrExists is returned by Write when the result file is already there: a run
// has exactly one result, and it is never overwritten.
var ErrExists = errors.New("result already written")

// Write stores r at path exactly once and atomically: it writes a hidden temp
// file in the same directory (created new, O_EXCL, mode 0600), fsyncs it,
// links it into place only if path does not exist yet (link(2) never follows
// or replaces what is there, be it a symbolic link or a FIFO), and fsyncs the
// directory. Readers see either no file or the whole file. It returns
// ErrExists (wrapped) when path already exists.
func Write(path string, r RunResult) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("result %s: encode: %w", path, err)
	}
	data = append(data, '\n')
	return writeOnce(path, data)
}

func writeOnce(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("result %s: create temp file: %w", path, err)
	}
	tmpName := tmp.Name()
	defer func() {
		// The temp name is removed in every case: after a successful link the
		// result lives on under its final name.
		_ = os.Remove(tmpName)
	}()
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("result %s: write: %w", path, err)
	}
	if err := tmp.Chmod(0o600); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("result %s: chmod: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("result %s: fsync: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("result %s: close: %w", path, err)
	}
	// link(2) fails with EEXIST instead of replacing, which gives "exactly
	// once" even if two writers race.
	if err := os.Link(tmpName, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("result %s: %w", path, ErrExists)
		}
		return fmt.Errorf("result %s: link into place: %w", path, err)
	}
	// At once, so that readers (which refuse files with two links) see the
	// result with one link.
	_ = os.Remove(tmpName)
	return syncDir(dir)
}

func syncDir(dir string) error {
	if err := safefile.SyncDir(dir); err != nil {
		return fmt.Errorf("result: %w", err)
	}
	return nil
}

// Read loads a result file through safefile: a symbolic link, a FIFO, a
// device, a file with more than two links or of more than MaxBytes is
// refused (the error wraps
// safefile.ErrUnsafe or safefile.ErrTooLarge), never followed or waited on.
func Read(path string) (RunResult, error) {
	var r RunResult
	// Two links: Write's temp name and the result's, for the moment
	// between link(2) and the temp name's removal.
	data, err := safefile.ReadFileLinks(path, MaxBytes, 2)
	if err != nil {
		return r, fmt.Errorf("result %s: %w", path, err)
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return r, fmt.Errorf("result %s: decode: %w", path, err)
	}
	return r, nil
}
