//go:build !linux

package localexec

import (
	"errors"
	"syscall"
)

// procIdentity without /proc knows liveness only: the start time is empty,
// so on such systems a reused pid cannot be told from the original process.
func procIdentity(pid int) (start string, alive bool, err error) {
	if err := syscall.Kill(pid, 0); err != nil && errors.Is(err, syscall.ESRCH) {
		return "", false, nil
	}
	return "", true, nil
}

func bootID() string { return "" }
