//go:build unix && !linux

package main

import "syscall"

// childAttr puts the command in its own process group when group is set, so
// that a lost lock stops everything it started.
func childAttr(group bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: group}
}
