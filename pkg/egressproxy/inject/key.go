package inject

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// FileKey is a key read from a file (a Secret's key, mounted into the
// proxy's pod). It is read again when the file's modification time or size
// changes, so that a rotated Secret is used once the kubelet has updated
// the mount, without a restart.
type FileKey struct {
	Path string

	mu    sync.Mutex
	mtime time.Time
	size  int64
	key   string
}

// Key returns the file's content without surrounding white space.
func (f *FileKey) Key() (string, error) {
	st, err := os.Stat(f.Path)
	if err != nil {
		return "", fmt.Errorf("key file %s: %w", f.Path, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.key != "" && st.ModTime().Equal(f.mtime) && st.Size() == f.size {
		return f.key, nil
	}
	raw, err := os.ReadFile(f.Path)
	if err != nil {
		return "", fmt.Errorf("key file %s: %w", f.Path, err)
	}
	key := strings.TrimSpace(string(raw))
	if key == "" {
		return "", errors.New("key file " + f.Path + ": empty")
	}
	f.key, f.mtime, f.size = key, st.ModTime(), st.Size()
	return key, nil
}
