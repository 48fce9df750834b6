package result

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Suffix is appended to a request's base name to form its result file name.
const Suffix = ".result.json"

// PathFor returns the result path of a request file: "dir/x.json" and
// "dir/x.yaml" both give "dir/x.result.json".
func PathFor(requestPath string) string {
	dir, base := filepath.Split(requestPath)
	return filepath.Join(dir, strings.TrimSuffix(base, filepath.Ext(base))+Suffix)
}

// ErrExists is returned by Write when the result file is already there: a run
// has exactly one result, and it is never overwritten.
var ErrExists = errors.New("result already written")

// Write stores r at path exactly once and atomically: it writes a hidden temp
// file in the same directory, fsyncs it, links it into place only if path does
// not exist yet, and fsyncs the directory. Readers see either no file or the
// whole file. It returns ErrExists (wrapped) when path already exists.
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
	if err := tmp.Chmod(0o644); err != nil {
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
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("result: open directory %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("result: fsync directory %s: %w", dir, err)
	}
	return nil
}

// Read loads a result file.
func Read(path string) (RunResult, error) {
	var r RunResult
	data, err := os.ReadFile(path)
	if err != nil {
		return r, fmt.Errorf("result %s: %w", path, err)
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return r, fmt.Errorf("result %s: decode: %w", path, err)
	}
	return r, nil
}
