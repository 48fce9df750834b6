// Package safefile opens the files of the spool and of the state directory
// the one safe way. The spool is written by other programs (and people), so
// any name in it may be a symbolic link to a file elsewhere, a hard link to
// one, a FIFO that blocks whoever opens it, or a device that never ends.
// Every function here refuses to follow a symbolic link (O_NOFOLLOW), never
// blocks on a FIFO (O_NONBLOCK), checks with fstat that what it opened is a
// regular file with one link, and reads with a size limit. Files it creates
// are 0600 unless asked otherwise.
//
// pcsync's code opens no spool or state file any other way: reads go
// through Open, ReadFile and ReadJSON, appends and truncations through
// OpenWrite, whole-file replacements through WriteAtomic, and its lock
// files (the daemon's, the run journal's, the sandbox command server's)
// through TryLock, LockWait and Held (lock.go).
package safefile

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// NameMax is the longest file name (one path element, in bytes) the file
// systems pcsync runs on accept.
const NameMax = 255

// ErrUnsafe is wrapped by every error about a file that is not a regular
// file of its own: a symbolic link, a FIFO, a directory, a device, a socket,
// or a file with more than one hard link.
var ErrUnsafe = errors.New("not a regular file")

// ErrTooLarge is wrapped when a file holds more than the limit a reader set.
var ErrTooLarge = errors.New("file too large")

// UnsafeError says what a path is instead of a regular file of its own.
type UnsafeError struct {
	// Path is the file.
	Path string
	// What is "a symbolic link", "a named pipe", … or "has 2 hard links".
	What string
}

// Error implements error: "/spool/x.log: not a regular file: a symbolic
// link", "/spool/x.log: has 2 hard links".
func (e *UnsafeError) Error() string { return e.Path + ": " + e.Reason() }

// Reason is the error without the path: "not a regular file: a named pipe",
// "has 2 hard links".
func (e *UnsafeError) Reason() string {
	switch {
	case e.What == "":
		return ErrUnsafe.Error()
	case strings.HasPrefix(e.What, "has "):
		return e.What
	}
	return ErrUnsafe.Error() + ": " + e.What
}

// Unwrap makes errors.Is(err, ErrUnsafe) true.
func (e *UnsafeError) Unwrap() error { return ErrUnsafe }

// Describe names the type of a file that is not regular ("a named pipe"),
// or says how many links a regular file has when it has more than one; it
// returns "" for a regular file with one link.
func Describe(fi fs.FileInfo) string { return describe(fi, 1) }

// describe is Describe with up to maxLinks links allowed.
func describe(fi fs.FileInfo, maxLinks uint64) string {
	m := fi.Mode()
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeDir != 0:
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	case !m.IsRegular():
		return "not a regular file"
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && uint64(st.Nlink) > maxLinks { //nolint:unconvert // Nlink is a uint32 on some architectures
		return fmt.Sprintf("has %d hard links", st.Nlink)
	}
	return ""
}

// Check reports whether path, if it exists, is a regular file of its own,
// without opening it (lstat). exists is false when there is nothing there;
// err is an *UnsafeError for anything else than a regular file with one
// link.
func Check(path string) (exists bool, err error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if what := Describe(fi); what != "" {
		return true, &UnsafeError{Path: path, What: what}
	}
	return true, nil
}

// check fstats an opened file and closes it when it is not a regular file
// with at most maxLinks links.
func check(f *os.File, path string, maxLinks uint64) (fs.FileInfo, error) {
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if what := describe(fi, maxLinks); what != "" {
		f.Close()
		return nil, &UnsafeError{Path: path, What: what}
	}
	return fi, nil
}

// openErr turns the ELOOP of O_NOFOLLOW into an *UnsafeError.
func openErr(path string, err error) error {
	if errors.Is(err, syscall.ELOOP) {
		return &UnsafeError{Path: path, What: "a symbolic link"}
	}
	if errors.Is(err, syscall.ENXIO) {
		// O_WRONLY|O_NONBLOCK on a FIFO without a reader.
		return &UnsafeError{Path: path, What: "a named pipe"}
	}
	if errors.Is(err, syscall.EISDIR) {
		return &UnsafeError{Path: path, What: "a directory"}
	}
	return err
}

// Open opens path for reading: no symbolic link followed, no wait on a
// FIFO, and only a regular file with one link. The error wraps
// fs.ErrNotExist when there is no file, ErrUnsafe when it is something
// else.
func Open(path string) (*os.File, fs.FileInfo, error) { return openLinks(path, 1) }

func openLinks(path string, maxLinks uint64) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, openErr(path, err)
	}
	fi, err := check(f, path, maxLinks)
	if err != nil {
		return nil, nil, err
	}
	return f, fi, nil
}

// ReadFile reads a whole file of at most limit bytes, opened as Open does.
// A larger file gives an error wrapping ErrTooLarge.
func ReadFile(path string, limit int64) ([]byte, error) { return ReadFileLinks(path, limit, 1) }

// ReadFileLinks is ReadFile for a file that may have up to maxLinks hard
// links: a file that its writer links into place (link(2), for "exactly
// once") has two for a moment.
func ReadFileLinks(path string, limit int64, maxLinks uint64) ([]byte, error) {
	f, _, err := openLinks(path, maxLinks)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: %w: more than %d bytes", path, ErrTooLarge, limit)
	}
	return data, nil
}

// ReadJSON decodes the JSON file path, of at most limit bytes, into v. ok
// is false (and err nil) when the file does not exist: optional state.
func ReadJSON(path string, limit int64, v any) (ok bool, err error) {
	data, err := ReadFile(path, limit)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return false, fmt.Errorf("%s: decode: %w", path, err)
	}
	return true, nil
}

// WriteMode says how OpenWrite opens a file.
type WriteMode int

// The ways OpenWrite opens a file.
const (
	// Append creates the file if needed and appends to it.
	Append WriteMode = iota
	// Truncate creates the file if needed and empties it.
	Truncate
	// Exclusive creates a new file; an existing one is an error wrapping
	// fs.ErrExist.
	Exclusive
	// ReadWrite creates the file if needed and opens it for reading and
	// writing, at offset 0.
	ReadWrite
)

// OpenWrite opens path for writing as mode says, never through a symbolic
// link, never blocking on a FIFO, and only when what it opened is a regular
// file with one link (checked before Truncate empties it). A file it
// creates gets perm; an existing one is set to perm too, so that a file
// created wider by an older version is narrowed.
func OpenWrite(path string, mode WriteMode, perm os.FileMode) (*os.File, error) {
	flags := syscall.O_NOFOLLOW | syscall.O_NONBLOCK | syscall.O_CLOEXEC | os.O_CREATE
	switch mode {
	case Append:
		flags |= os.O_WRONLY | os.O_APPEND
	case Truncate:
		flags |= os.O_WRONLY
	case Exclusive:
		flags |= os.O_WRONLY | os.O_EXCL | os.O_APPEND
	case ReadWrite:
		flags |= os.O_RDWR
	}
	f, err := os.OpenFile(path, flags, perm)
	if err != nil {
		return nil, openErr(path, err)
	}
	if _, err := check(f, path, 1); err != nil {
		return nil, err
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return nil, fmt.Errorf("chmod %s: %w", path, err)
	}
	if mode == Truncate {
		if err := f.Truncate(0); err != nil {
			f.Close()
			return nil, fmt.Errorf("truncate %s: %w", path, err)
		}
	}
	return f, nil
}

// WriteAtomic replaces path with data: a new temp file in the same
// directory (O_EXCL: never an existing file or link), written, set to perm,
// renamed over path (rename replaces the name, it does not follow a link
// there). durable adds an fsync of the file before the rename and of the
// directory after it, so that the new content survives a power loss.
func WriteAtomic(path string, data []byte, perm os.FileMode, durable bool) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return fmt.Errorf("write %s: chmod: %w", path, err)
	}
	if durable {
		if err := f.Sync(); err != nil {
			f.Close()
			return fmt.Errorf("write %s: fsync: %w", path, err)
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if !durable {
		return nil
	}
	return SyncDir(dir)
}

// SyncDir fsyncs a directory, which makes a rename or link in it durable.
func SyncDir(dir string) error {
	d, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// MkdirAll creates dir and its missing parents with mode 0700 (never
// wider, whatever the umask allows).
func MkdirAll(dir string) error { return os.MkdirAll(dir, 0o700) }

// IsTemp reports whether name is the name of a temp file that WriteAtomic
// (or a writer using its naming) creates for a file whose name ends in
// suffix: ".<base><suffix>.<digits>.tmp".
func IsTemp(name, suffix string) bool {
	rest, ok := strings.CutSuffix(name, ".tmp")
	if !ok || !strings.HasPrefix(rest, ".") {
		return false
	}
	i := strings.LastIndexByte(rest, '.')
	if i <= 0 {
		return false
	}
	digits, base := rest[i+1:], rest[1:i]
	if digits == "" || strings.Trim(digits, "0123456789") != "" {
		return false
	}
	return len(base) > len(suffix) && strings.HasSuffix(base, suffix)
}

// RemoveTemps removes the temp files (see IsTemp) that writers stopped
// between creating one and renaming or linking it into place (a SIGKILL, a
// power loss) left in dir, and returns their paths. Only regular files are
// removed. The caller must know that no writer is at work in dir (pcsync:
// the daemon holds its lock). A missing dir has none.
func RemoveTemps(dir, suffix string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("remove temp files: %w", err)
	}
	var removed []string
	var errs []error
	for _, de := range entries {
		if !de.Type().IsRegular() || !IsTemp(de.Name(), suffix) {
			continue
		}
		path := filepath.Join(dir, de.Name())
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove temp file: %w", err))
			continue
		}
		removed = append(removed, path)
	}
	return removed, errors.Join(errs...)
}
