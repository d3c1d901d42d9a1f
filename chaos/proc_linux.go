package chaos

import (
	"bytes"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// sharedNow reads CLOCK_MONOTONIC: one clock for every process of the
// machine, which NTP does not step. Go's own monotonic readings come from
// it too, but relative to each process's start.
func sharedNow() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// procAttr makes a client process die with Run's process (Pdeathsig).
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// procStopped reports whether process pid is stopped (state T in
// /proc/PID/stat); known is false when that cannot be read.
func procStopped(pid int) (stopped, known bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false, false
	}
	i := bytes.LastIndexByte(b, ')') // comm may hold spaces and parentheses
	if i < 0 || i+2 >= len(b) {
		return false, false
	}
	return b[i+2] == 'T', true
}
