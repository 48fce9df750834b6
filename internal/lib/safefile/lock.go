package safefile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// ErrLocked is wrapped by the error of TryLock and LockWait when another
// open file description (another process, or another TryLock in this one)
// holds the lock.
var ErrLocked = errors.New("locked by another process")

// Lock is an exclusive advisory lock (flock(2)) on a lock file. The kernel
// drops it when the process exits, however it exits, so a crashed daemon
// never leaves a lock behind.
type Lock struct {
	f *os.File
}

// TryLock opens path as OpenWrite does (created with perm, never through a
// link) and takes an exclusive flock on it without waiting. When the lock
// is held the error wraps ErrLocked.
func TryLock(path string, perm os.FileMode) (*Lock, error) {
	f, err := OpenWrite(path, ReadWrite, perm)
	if err != nil {
		return nil, err
	}
	if err := flock(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return &Lock{f: f}, nil
}

// LockWait is TryLock tried again every poll until wait has passed: for a
// lock that a holder of the same process is about to give up.
func LockWait(path string, perm os.FileMode, wait, poll time.Duration) (*Lock, error) {
	deadline := time.Now().Add(wait)
	for {
		l, err := TryLock(path, perm)
		if err == nil || !errors.Is(err, ErrLocked) || time.Now().After(deadline) {
			return l, err
		}
		time.Sleep(poll)
	}
}

// LockContext is TryLock tried again every poll until the lock is taken or
// ctx ends: for a lock another process may hold for minutes. waiting, when
// not nil, is called once, when the lock is first found held. The error of
// an end of ctx wraps ErrLocked and ctx's error.
//
// It polls rather than blocking in flock(2): a blocked flock cannot be
// interrupted on Linux (closing its file does not wake it), so a wait
// stopped by ctx would leave a goroutine that takes the lock later.
func LockContext(ctx context.Context, path string, perm os.FileMode, poll time.Duration, waiting func()) (*Lock, error) {
	t := time.NewTicker(poll)
	defer t.Stop()
	for first := true; ; first = false {
		l, err := TryLock(path, perm)
		if err == nil || !errors.Is(err, ErrLocked) {
			return l, err
		}
		if first && waiting != nil {
			waiting()
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("lock %s: %w (%w)", path, ErrLocked, context.Cause(ctx))
		case <-t.C:
		}
	}
}

// File is the lock's file, open for reading and writing: a holder may
// record itself in it.
func (l *Lock) File() *os.File { return l.f }

// Unlock releases the lock and closes its file. It is safe on a nil Lock
// and more than once.
func (l *Lock) Unlock() {
	if l == nil || l.f == nil {
		return
	}
	_ = unix.Flock(int(l.f.Fd()), unix.LOCK_UN)
	l.f.Close()
	l.f = nil
}

// Held reports whether some process holds the lock on path, without
// taking it for longer than the test. A missing file is not held; an error
// means the lock could not be looked at (a link, no permission).
func Held(path string) (bool, error) {
	f, _, err := Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	if err := flock(f); err != nil {
		if errors.Is(err, ErrLocked) {
			return true, nil
		}
		return false, fmt.Errorf("lock %s: %w", path, err)
	}
	_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
	return false, nil
}

// flock takes an exclusive lock on f without waiting; a lock held elsewhere
// gives ErrLocked.
func flock(f *os.File) error {
	err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return ErrLocked
	}
	return err
}
