//go:build linux

package localexec

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// procIdentity returns what identifies a live process beyond its pid: its
// start time in clock ticks since boot (field 22 of /proc/<pid>/stat). It
// reports alive=false for a process that is gone or a zombie.
func procIdentity(pid int) (start string, alive bool, err error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", false, nil
		}
		return "", false, fmt.Errorf("process %d: %w", pid, err)
	}
	// The command name (field 2) is in parentheses and may hold spaces or
	// parentheses; the fields after the last ')' are well formed.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return "", false, fmt.Errorf("process %d: unexpected /proc stat format", pid)
	}
	fields := strings.Fields(string(data[i+1:]))
	// fields[0] is field 3 (state); field 22 is fields[19].
	if len(fields) < 20 {
		return "", false, fmt.Errorf("process %d: unexpected /proc stat format", pid)
	}
	if fields[0] == "Z" || fields[0] == "X" {
		return fields[19], false, nil
	}
	return fields[19], true, nil
}

// bootID identifies the current boot, so that a pid and start time from an
// earlier boot never match a process of this one.
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
