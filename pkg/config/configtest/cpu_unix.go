//go:build unix

package configtest

import (
	"syscall"
	"time"
)

// ProcessCPU is the CPU time (user and system, all threads, the garbage
// collector's included) the process has used so far. Benchmarks report
// it per operation: on a machine shared with other work it is a steadier
// figure than wall time.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
