package imagebuild

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestEnsureMakesOnce runs ensure for one key from several goroutines (as
// parallel test binaries would): make runs once, every caller gets the
// whole entry, and no temporary directory is left.
func TestEnsureMakesOnce(t *testing.T) {
	dir := t.TempDir()
	var calls atomic.Int32
	var wg sync.WaitGroup
	got := make([]string, 4)
	errs := make([]error, 4)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = ensure(context.Background(), dir, "k-1", func(ctx context.Context, tmp string) error {
				calls.Add(1)
				return os.WriteFile(filepath.Join(tmp, "data"), []byte("x"), 0o644)
			})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("ensure %d: %v", i, err)
		}
		if diff := cmp.Diff(filepath.Join(dir, "k-1"), got[i]); diff != "" {
			t.Errorf("ensure %d (-want +got):\n%s", i, diff)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("make ran %d times, want 1", n)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if diff := cmp.Diff([]string{"k-1", "k-1.lock"}, names); diff != "" {
		t.Errorf("cache directory (-want +got):\n%s", diff)
	}
	data, err := os.ReadFile(filepath.Join(dir, "k-1", "data"))
	if err != nil || string(data) != "x" {
		t.Errorf("entry's data = %q, %v", data, err)
	}
}

func TestCacheKey(t *testing.T) {
	a := cacheKey("base", struct{ Suite string }{"bookworm"})
	tests := []struct {
		name   string
		key    string
		sameAs bool
	}{
		{"same inputs", cacheKey("base", struct{ Suite string }{"bookworm"}), true},
		{"other inputs", cacheKey("base", struct{ Suite string }{"trixie"}), false},
		{"other kind", cacheKey("node", struct{ Suite string }{"bookworm"}), false},
	}
	for _, tt := range tests {
		if got := tt.key == a; got != tt.sameAs {
			t.Errorf("%s: key %s vs %s: same = %v, want %v", tt.name, tt.key, a, got, tt.sameAs)
		}
	}
}

func TestIsLoopback(t *testing.T) {
	tests := []struct {
		registry string
		want     bool
	}{
		{"127.0.0.1:5000", true},
		{"127.0.0.1:5000/org/team", true},
		{"localhost:5000/pcsync", true},
		{"[::1]:5000", true},
		{"ghcr.io/pcsync", false},
		{"10.0.0.1:5000", false},
	}
	for _, tt := range tests {
		if got := isLoopback(tt.registry); got != tt.want {
			t.Errorf("isLoopback(%q) = %v, want %v", tt.registry, got, tt.want)
		}
	}
}
