package kubeexec

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/pcsync/pcsync/pkg/safefile"
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

// writeMarker stores m durably (safefile.WriteAtomic: temp file, fsync,
// rename, fsync of the directory), mode 0600.
func writeMarker(path string, m marker) error {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("run marker %s: %w", path, err)
	}
	if err := safefile.MkdirAll(filepath.Dir(path)); err != nil {
		return fmt.Errorf("run marker %s: %w", path, err)
	}
	if err := safefile.WriteAtomic(path, append(data, '\n'), 0o600, true); err != nil {
		return fmt.Errorf("run marker: %w", err)
	}
	return nil
}

// maxMarkerBytes is the most readMarker reads; a marker is a few hundred
// bytes.
const maxMarkerBytes = 1 << 20

// readMarker loads a marker; ok is false when there is none.
func readMarker(path string) (m marker, ok bool, err error) {
	ok, err = safefile.ReadJSON(path, maxMarkerBytes, &m)
	if err != nil {
		return m, false, fmt.Errorf("run marker: %w", err)
	}
	return m, ok, nil
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
