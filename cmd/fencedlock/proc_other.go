//go:build unix && !linux

package main

import (
	"errors"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// seesTree: without /proc and a child subreaper, the supervisor sees only
// COMMAND and signals its process group; processes that leave the group
// escape.
const seesTree = false

func becomeSubreaper() error { return errors.ErrUnsupported }

func selfExe() (string, error) { return os.Executable() }

// bootNow is CLOCK_MONOTONIC: one clock for every process of the machine.
func bootNow() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return time.Duration(ts.Nano())
}

func commandAttr(pgid int) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pgid: pgid}
}

// socketPair is a connected pair of Unix stream sockets, close-on-exec.
func socketPair() ([2]int, error) {
	syscall.ForkLock.RLock() // no fork between the socket and its close-on-exec flag
	defer syscall.ForkLock.RUnlock()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err == nil {
		unix.CloseOnExec(fds[0])
		unix.CloseOnExec(fds[1])
	}
	return fds, err
}

// watchEnd: fencedlock sees COMMAND end only through the supervisor.
func watchEnd(int) (<-chan struct{}, func()) { return nil, func() {} }

type proc struct {
	pid, pgid int
	state     byte
}

func (p proc) stopped() bool { return false }

func descendants(int) []proc { return nil }
