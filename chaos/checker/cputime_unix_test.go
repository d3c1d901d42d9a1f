//go:build unix

package checker

import (
	"syscall"
	"time"
)

// cpuTime returns the CPU time the process has used, in user and system
// mode: unlike the wall clock, it does not grow when other processes take
// the machine's cores.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
