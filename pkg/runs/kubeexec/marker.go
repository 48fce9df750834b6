package kubeexec

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// markerFile is the marker's name in the run's state directory.
const markerFile = "kubernetes.json"

// marker is <state>/runs/<name>/kubernetes.json, written before the run's
// Job is created. A daemon that finds the marker but no Job knows the run
// was started (or about to be) and must not be started again: the Job was
// deleted, or removed by its TTL while no daemon watched, or the daemon
// stopped between the two steps. It holds no secrets.
type marker struct {
	RunID     string    `json:"runId"`
	Namespace string    `json:"namespace"`
	Job       string    `json:"job"`
	Request   string    `json:"request"`
	CreatedAt time.Time `json:"createdAt"`
}

func markerPath(stateDir, name string) string {
	return filepath.Join(stateDir, "runs", name, markerFile)
}

// writeMarker stores m durably: temp file, fsync, rename, fsync of the
// directory.
func writeMarker(path string, m marker) error {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("run marker %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("run marker %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(dir, "."+markerFile+".*.tmp")
	if err != nil {
		return fmt.Errorf("run marker %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(data, '\n')); err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err == nil {
		var d *os.File
		if d, err = os.Open(dir); err == nil {
			err = d.Sync()
			d.Close()
		}
	}
	if err != nil {
		return fmt.Errorf("run marker %s: %w", path, err)
	}
	return nil
}

// readMarker loads a marker; ok is false when there is none.
func readMarker(path string) (m marker, ok bool, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return m, false, nil
	}
	if err != nil {
		return m, false, fmt.Errorf("run marker %s: %w", path, err)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return m, false, fmt.Errorf("run marker %s: %w", path, err)
	}
	return m, true, nil
}

// removeMarker deletes the marker and, when it is empty, the run's state
// directory.
func removeMarker(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("run marker %s: %w", path, err)
	}
	_ = os.Remove(filepath.Dir(path)) // fails, harmlessly, when not empty
	return nil
}
