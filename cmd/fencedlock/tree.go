package main

import (
	"os"
	"syscall"
	"time"
)

// The tree is COMMAND and every process below the supervisor: on Linux,
// where the supervisor is a child subreaper, every process COMMAND started,
// however it detached. These are the supervisor's ways to signal it.

// selfStopWait is how long, with --foreground, processes in fencedlock's own
// group may take to stop on the terminal's SIGTSTP by themselves (an editor
// restores the screen first) before the supervisor stops them with SIGSTOP.
const selfStopWait = time.Second

// kill sends SIGKILL to the tree, and again on every tick of the loop
// until it is empty.
func (s *supervisor) kill() {
	s.killing = true
	s.signalTree(syscall.SIGKILL)
}

// signalCommand sends sig to COMMAND: to its process group, unless it shares
// fencedlock's (--foreground).
func (s *supervisor) signalCommand(sig syscall.Signal) {
	if s.fgPgid != 0 {
		_ = syscall.Kill(s.cmd, sig)
		return
	}
	_ = syscall.Kill(-s.cmd, sig)
}

// signalTree sends sig to every process of the tree.
func (s *supervisor) signalTree(sig syscall.Signal) {
	if s.fgPgid == 0 && (!s.cmdEnded || !seesTree) {
		_ = syscall.Kill(-s.cmd, sig) // the group exists while COMMAND is unreaped
	}
	for _, p := range descendants(os.Getpid()) {
		_ = syscall.Kill(p.pid, sig)
	}
}

// stopTree sends SIGSTOP to what of the tree still runs, and says
// "suspended" once all of it is stopped. With --foreground, processes in
// fencedlock's group first get selfStopWait to stop on the terminal's SIGTSTP.
func (s *supervisor) stopTree() {
	all := true
	for _, p := range descendants(os.Getpid()) {
		if p.stopped() {
			continue
		}
		all = false
		if p.pgid == s.fgPgid && time.Since(s.suspended) < selfStopWait {
			continue
		}
		s.ourStops[p.pid] = true
		_ = syscall.Kill(p.pid, syscall.SIGSTOP)
	}
	if !seesTree {
		s.signalCommand(syscall.SIGSTOP)
		all = true
	}
	if all {
		s.confirmed = true
		s.send("suspended")
	}
}
