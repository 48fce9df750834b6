//go:build !unix

package configtest

import "time"

// ProcessCPU is the CPU time the process has used so far; 0 where the
// platform does not tell.
func ProcessCPU() time.Duration { return 0 }
