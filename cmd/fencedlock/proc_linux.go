package main

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// seesTree: on Linux the supervisor is a child subreaper and reads /proc, so
// it sees and signals every descendant of COMMAND, however it detached.
const seesTree = true

// becomeSubreaper makes the calling process the parent of every orphan among
// its descendants: a grandchild whose parent exits, also one that called
// setsid or double-forked, is re-parented to it instead of to init.
func becomeSubreaper() error { return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) }

// selfExe runs this program's binary, even if the file was replaced since.
func selfExe() (string, error) { return "/proc/self/exe", nil }

// bootNow is CLOCK_BOOTTIME: one clock for every process of the machine, and
// it runs on through a suspend, as the lock's TTL on the nodes does.
func bootNow() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts)
	return time.Duration(ts.Nano())
}

// commandAttr starts COMMAND in process group pgid (0: a new one). Pdeathsig
// kills COMMAND if the supervisor itself is killed.
func commandAttr(pgid int) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pgid: pgid, Pdeathsig: syscall.SIGKILL}
}

// socketPair is a connected pair of Unix stream sockets, close-on-exec.
func socketPair() ([2]int, error) {
	return unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
}

// watchEnd returns a channel that is closed when process pid ends (its
// zombie counts: fencedlock is not its parent), and a function that stops
// the watch. The channel is nil where pid cannot be watched (a kernel
// without pidfd_open, a pid already gone).
func watchEnd(pid int) (<-chan struct{}, func()) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil, func() {}
	}
	_ = unix.SetNonblock(fd, true) // so the runtime's poller watches it
	f := os.NewFile(uintptr(fd), "pidfd")
	rc, err := f.SyscallConn()
	if err != nil {
		_ = f.Close()
		return nil, func() {}
	}
	ended, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		err := rc.Read(func(fd uintptr) bool { // a pidfd is readable once the process ended
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			n, _ := unix.Poll(fds, 0)
			return n > 0
		})
		if err == nil {
			close(ended)
		}
	}()
	return ended, func() { _ = f.Close(); <-watched }
}

// proc is one process as /proc shows it.
type proc struct {
	pid, pgid int
	state     byte // R, S, D, T (stopped), t (traced), Z (zombie), ...
}

func (p proc) stopped() bool { return p.state == 'T' || p.state == 't' }

// descendants lists the live processes below root (zombies left out).
func descendants(root int) []proc {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	type stat struct {
		proc
		ppid int
	}
	children := make(map[int][]stat)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		s, ok := readStat(pid)
		if ok {
			children[s.ppid] = append(children[s.ppid], stat{proc{pid, s.pgid, s.state}, s.ppid})
		}
	}
	var out []proc
	queue := []int{root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, c := range children[pid] {
			queue = append(queue, c.pid)
			if c.state != 'Z' && c.state != 'X' {
				out = append(out, c.proc)
			}
		}
	}
	return out
}

type procStat struct {
	ppid, pgid int
	state      byte
}

// readStat parses /proc/PID/stat: "pid (comm) state ppid pgrp ...", where
// comm may hold spaces and parentheses.
func readStat(pid int) (procStat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 3 || len(f[0]) != 1 {
		return procStat{}, false
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	pgid, err2 := strconv.Atoi(string(f[2]))
	if err1 != nil || err2 != nil {
		return procStat{}, false
	}
	return procStat{ppid: ppid, pgid: pgid, state: f[0][0]}, true
}
