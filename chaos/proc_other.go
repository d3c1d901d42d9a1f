//go:build unix && !linux

package chaos

import (
	"syscall"
	"time"
)

// sharedNow reads the wall clock, in nanoseconds: shared by the processes
// of the machine, but stepped by NTP, which then shifts the client
// processes' ops against Run's by the step.
func sharedNow() int64 { return time.Now().UnixNano() }

// procAttr: without Pdeathsig, client processes end when they read the end
// of their stdin, which Run's death closes.
func procAttr() *syscall.SysProcAttr { return nil }

// procStopped cannot tell whether the process stopped.
func procStopped(int) (stopped, known bool) { return false, false }
