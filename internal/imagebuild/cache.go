package imagebuild

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/pcsync/pcsync/internal/lib/safefile"
)

// cacheFormat changes when what a cached entry holds, or how it is made,
// changes in a way its inputs do not show: every key includes it.
const cacheFormat = 1

// completeFile marks a cache entry as whole.
const completeFile = ".complete"

// cacheKey returns "<kind>-<hash>", the hash covering cacheFormat and
// inputs (JSON-encoded).
func cacheKey(kind string, inputs any) string {
	data, err := json.Marshal(struct {
		Format int
		Inputs any
	}{cacheFormat, inputs})
	if err != nil {
		panic(fmt.Sprintf("imagebuild: cache key of %s: %v", kind, err)) // inputs are plain data
	}
	sum := sha256.Sum256(data)
	return kind + "-" + hex.EncodeToString(sum[:8])
}

// ensure returns the cache entry dir/key, making it with make when it is
// missing: under the lock file dir/key.lock, in a temporary directory
// renamed into place once make returns, so a reader sees an entry whole or
// not at all.
func ensure(ctx context.Context, dir, key string, make func(ctx context.Context, tmp string) error) (string, error) {
	entry := filepath.Join(dir, key)
	if _, err := os.Stat(filepath.Join(entry, completeFile)); err == nil {
		return entry, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("cache %s: %w", dir, err)
	}
	lock, err := safefile.LockContext(ctx, entry+".lock", 0o644, 100*time.Millisecond, nil)
	if err != nil {
		return "", fmt.Errorf("cache %s: %w", entry, err)
	}
	defer lock.Unlock()
	if _, err := os.Stat(filepath.Join(entry, completeFile)); err == nil {
		return entry, nil // made while we waited
	}
	if err := os.RemoveAll(entry); err != nil { // an incomplete leftover
		return "", fmt.Errorf("cache %s: %w", entry, err)
	}
	tmp, err := os.MkdirTemp(dir, key+".tmp-")
	if err != nil {
		return "", fmt.Errorf("cache %s: %w", entry, err)
	}
	defer os.RemoveAll(tmp)
	if err := make(ctx, tmp); err != nil {
		return "", fmt.Errorf("cache %s: %w", key, err)
	}
	if err := os.WriteFile(filepath.Join(tmp, completeFile), nil, 0o644); err != nil {
		return "", fmt.Errorf("cache %s: %w", entry, err)
	}
	if err := os.Rename(tmp, entry); err != nil {
		return "", fmt.Errorf("cache %s: %w", entry, err)
	}
	return entry, nil
}
