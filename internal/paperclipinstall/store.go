package paperclipinstall

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/pcsync/pcsync/internal/lib/safefile"
)

// StoreFile is Paperclip's external-adapter store, under its home
// (PAPERCLIP_HOME): a JSON array of records, one per adapter type.
const StoreFile = "adapter-plugins.json"

// adapterRecord is a record of Paperclip's store, as its install route
// writes it.
type adapterRecord struct {
	PackageName string `json:"packageName"`
	LocalPath   string `json:"localPath,omitempty"`
	Version     string `json:"version,omitempty"`
	Type        string `json:"type"`
	InstalledAt string `json:"installedAt,omitempty"`
}

// Action is what Install did to a package.
type Action string

// Actions.
const (
	ActionInstalled Action = "installed" // no record of the type before
	ActionUpdated   Action = "updated"   // a record of another version or path replaced
	ActionKept      Action = "kept"      // the same record was there
)

// upsertAdapter makes the store at path hold rec for its type, keeping
// every other record as it is, and says what it did. A store that is not
// a JSON array is an error and is left as it is.
func upsertAdapter(path string, rec adapterRecord, now time.Time) (Action, error) {
	records, err := readStore(path)
	if err != nil {
		return "", err
	}
	action := ActionInstalled
	idx := -1
	for i, raw := range records {
		var r adapterRecord
		if json.Unmarshal(raw, &r) == nil && r.Type == rec.Type {
			idx = i
			if r.PackageName == rec.PackageName && r.LocalPath == rec.LocalPath && r.Version == rec.Version {
				return ActionKept, nil
			}
			action = ActionUpdated
		}
	}
	rec.InstalledAt = now.UTC().Format(time.RFC3339)
	data, err := json.Marshal(rec)
	if err != nil {
		return "", err
	}
	if idx >= 0 {
		records[idx] = data
	} else {
		records = append(records, data)
	}
	out, err := json.MarshalIndent(records, "", "  ")
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if err := safefile.WriteAtomic(path, out, 0o644, true); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return action, nil
}

// readStore reads the store's records; a missing store has none.
func readStore(path string) ([]json.RawMessage, error) {
	data, err := safefile.ReadFile(path, 8<<20)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var records []json.RawMessage
	if err := json.Unmarshal(data, &records); err != nil {
		return nil, fmt.Errorf("%s: Paperclip's adapter store is not a JSON array (%w); left as it is", path, err)
	}
	return records, nil
}
