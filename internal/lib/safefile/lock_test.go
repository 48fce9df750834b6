package safefile

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestLock(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "daemon.lock")

	if held, err := Held(path); err != nil || held {
		t.Fatalf("Held(no file) = %v, %v; want false, nil", held, err)
	}
	l, err := TryLock(path, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("lock file: %v, %v; want mode 0600", fi, err)
	}
	if held, err := Held(path); err != nil || !held {
		t.Fatalf("Held(locked) = %v, %v; want true, nil", held, err)
	}
	if _, err := TryLock(path, 0o600); !errors.Is(err, ErrLocked) {
		t.Fatalf("second TryLock: %v; want ErrLocked", err)
	}
	if _, err := LockWait(path, 0o600, 20*time.Millisecond, 5*time.Millisecond); !errors.Is(err, ErrLocked) {
		t.Fatalf("LockWait while held: %v; want ErrLocked", err)
	}

	// A waiter gets the lock once the holder lets go.
	got := make(chan error, 1)
	go func() {
		l2, err := LockWait(path, 0o600, 10*time.Second, 5*time.Millisecond)
		l2.Unlock()
		got <- err
	}()
	l.Unlock()
	l.Unlock() // a second Unlock does nothing
	if err := <-got; err != nil {
		t.Fatalf("LockWait after Unlock: %v", err)
	}
	if held, err := Held(path); err != nil || held {
		t.Fatalf("Held(released) = %v, %v; want false, nil", held, err)
	}
}

func TestLockRefusesALink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "elsewhere")
	if err := os.WriteFile(target, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "daemon.lock")
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	if _, err := TryLock(path, 0o600); !errors.Is(err, ErrUnsafe) {
		t.Errorf("TryLock(symlink): %v; want ErrUnsafe", err)
	}
	if _, err := Held(path); !errors.Is(err, ErrUnsafe) {
		t.Errorf("Held(symlink): %v; want ErrUnsafe", err)
	}
}

// LockContext waits while the lock is held, says so once, gives up when
// its context ends (and then holds nothing), and takes the lock once the
// holder lets go.
func TestLockContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "machine.lock")
	l, err := TryLock(path, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	waited := 0
	_, err = LockContext(ctx, path, 0o644, time.Millisecond, func() { waited++; cancel() })
	if !errors.Is(err, ErrLocked) || !errors.Is(err, context.Canceled) || waited != 1 {
		t.Fatalf("LockContext while held, ctx cancelled: %v, waiting called %d times; want ErrLocked and context.Canceled, once", err, waited)
	}

	got := make(chan error, 1)
	waiting := make(chan struct{})
	go func() {
		l2, err := LockContext(t.Context(), path, 0o644, time.Millisecond, func() { close(waiting) })
		if err == nil {
			_, err = l2.File().WriteString("holder\n")
			l2.Unlock()
		}
		got <- err
	}()
	<-waiting
	l.Unlock()
	if err := <-got; err != nil {
		t.Fatalf("LockContext after Unlock: %v", err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "holder\n" {
		t.Fatalf("lock file = %q, %v; want what the holder wrote", b, err)
	}
	if held, err := Held(path); err != nil || held {
		t.Fatalf("Held(released) = %v, %v; want false, nil", held, err)
	}
}
