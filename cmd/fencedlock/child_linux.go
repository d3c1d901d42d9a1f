package main

import "syscall"

// childAttr puts the command in its own process group when group is set, so
// that a lost lock stops everything it started. Pdeathsig kills the command
// if fencedlock itself dies: it must not run on without the lock.
func childAttr(group bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: group, Pdeathsig: syscall.SIGKILL}
}
