//go:build unix

package console_test

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user and system) the test process has used:
// a page's cost that a loaded machine does not inflate as it does the
// wall time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
