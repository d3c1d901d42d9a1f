package main

import (
	"fmt"
	"os"
	"syscall"
	"time"
)

// The process that holds the lock enforces its end. fencedlock asks the
// supervisor to end the tree (a stop, or a kill), and holds it to that: a
// supervisor that has not confirmed the end in time, by exiting once the
// tree is empty, may be stopped (kill -STOP, a debugger, strace) or hung.
// fencedlock then ends the tree itself (see enforce).

// killAllowance is the time a kill of the tree is given to take effect: a
// tenth of the TTL, the head start the supervisor's own deadline gives its
// kill before the lock's validity ends (deadlineOf).
func killAllowance(ttl time.Duration) time.Duration { return ttl / 10 }

// stop asks the supervisor to stop the tree: SIGTERM, then SIGKILL after
// --grace. It is to confirm within grace and a kill's allowance.
func (r *runner) stop() {
	r.sup.send("stop %d", r.grace)
	r.expectEnd(r.grace + killAllowance(r.ttl))
}

// kill asks the supervisor to kill the tree now. It is to confirm within a
// kill's allowance.
func (r *runner) kill() {
	r.sup.send("kill")
	r.expectEnd(killAllowance(r.ttl))
}

// expectEnd notes that the supervisor is to be gone within d; an end due
// earlier stands.
func (r *runner) expectEnd(d time.Duration) {
	due := time.Now().Add(d)
	switch {
	case r.endTimer == nil:
		r.endTimer = time.NewTimer(d)
	case due.Before(r.endDue):
		r.endTimer.Reset(d)
	default:
		return
	}
	r.endDue, r.endWithin = due, d
}

// overdue yields once the end that the supervisor was asked for is due,
// unless fencedlock has enforced it already.
func (r *runner) overdue() <-chan time.Time {
	if r.endTimer == nil || r.enforced {
		return nil
	}
	return r.endTimer.C
}

// enforce ends the tree without the supervisor: SIGKILL to each process
// below it, to COMMAND's process group (COMMAND alone with --foreground:
// the group is fencedlock's), then SIGCONT and SIGKILL to the supervisor.
// The tree is signalled before the supervisor dies: while it lives, even
// stopped, it is the subreaper every orphan of the tree goes to, so no
// process found in /proc can slip out to init in between. COMMAND is
// signalled by pid only until the supervisor reported it ended (a stopped
// supervisor reaps nothing), so the pid is not another process's. The
// supervisor is continued before it is killed: should the
// kill not reach it, a running supervisor still ends the tree at its own
// deadline. Once it is gone, the events end and the run finishes.
func (r *runner) enforce() {
	r.enforced = true
	sup := r.sup.cmd.Process
	fmt.Fprintf(r.stderr, "fencedlock: the supervisor (pid %d) did not confirm the stop within %v: killing it and the command's processes (SIGKILL)\n",
		sup.Pid, r.endWithin)
	for _, p := range descendants(sup.Pid) {
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
	if !r.ended && r.cmdPid > 0 {
		if r.foreground {
			_ = syscall.Kill(r.cmdPid, syscall.SIGKILL)
		} else {
			_ = syscall.Kill(-r.cmdPid, syscall.SIGKILL)
		}
	}
	_ = sup.Signal(syscall.SIGCONT)
	_ = sup.Signal(os.Kill)
}
