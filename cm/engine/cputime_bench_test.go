//go:build unix

package engine

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time (user + system) the process used so far: the
// benchmarks report it next to wall time because the machines they run on
// are shared.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
