package spool

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/pcsync/pcsync/internal/lib/safefile"
	"github.com/pcsync/pcsync/pkg/runs"
)

// Prepare makes the spool of opts ready to serve, so that a daemon fails
// at its start, naming the spool, rather than when its runs loop starts:
// a missing spool is created (mode 0700) when its parent directory
// exists, and so is the state directory (StateDir, default
// <spool>/.pcsync). A spool that is not a directory, cannot be created or
// cannot be written is an error. New prepares the spool too.
func Prepare(opts Options) error {
	spool, err := filepath.Abs(opts.Spool)
	if err != nil {
		return fmt.Errorf("spool %s: %w", opts.Spool, err)
	}
	if err := ensureDir(spool); err != nil {
		return err
	}
	state := opts.StateDir
	if state == "" {
		state = runs.DefaultStateDir(spool)
	}
	if err := safefile.MkdirAll(state); err != nil {
		return fmt.Errorf("spool %s: state directory: %w", spool, err)
	}
	return nil
}

// ensureDir makes sure that spool is a directory pcsync may write in,
// creating it when only it is missing.
func ensureDir(spool string) error {
	fi, err := os.Stat(spool)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.Mkdir(spool, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			if errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("spool %s: missing, and so is its parent directory %s (create it, or fix --spool): %w",
					spool, filepath.Dir(spool), err)
			}
			return fmt.Errorf("spool %s: cannot create it: %w", spool, err)
		}
		fi, err = os.Stat(spool)
	}
	switch {
	case err != nil:
		return fmt.Errorf("spool %s: %w", spool, err)
	case !fi.IsDir():
		return fmt.Errorf("spool %s: not a directory", spool)
	}
	if err := unix.Access(spool, unix.W_OK|unix.X_OK); err != nil {
		return fmt.Errorf("spool %s: not writable: %w", spool, err)
	}
	return nil
}
