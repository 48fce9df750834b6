package cmdserver

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/pcsync/pcsync/internal/lib/safefile"
)

// listen locks Socket+".lock", replaces a stale socket and listens.
func listen(socket string) (net.Listener, func(), error) {
	dir := filepath.Dir(socket)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("cmdserver: create socket directory: %w", err)
	}
	lock, err := safefile.TryLock(socket+".lock", 0o600)
	if errors.Is(err, safefile.ErrLocked) {
		return nil, nil, fmt.Errorf("%w: %s", ErrAlreadyRunning, socket)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("cmdserver: %w", err)
	}
	if err := os.Remove(socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		lock.Unlock()
		return nil, nil, fmt.Errorf("cmdserver: remove stale socket: %w", err)
	}
	ln, err := net.Listen("unix", socket)
	if err != nil {
		lock.Unlock()
		return nil, nil, fmt.Errorf("cmdserver: listen: %w", err)
	}
	if err := os.Chmod(socket, 0o600); err != nil {
		ln.Close()
		lock.Unlock()
		return nil, nil, fmt.Errorf("cmdserver: chmod socket: %w", err)
	}
	return ln, func() { lock.Unlock() }, nil
}
