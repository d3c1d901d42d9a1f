package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fencedlock/fencedlock/redlock"
)

// runner runs the command under the lock, through the supervisor process
// (supervisor.go), which sees and stops COMMAND's whole tree.
type runner struct {
	lock       *redlock.Lock
	path       string   // COMMAND, as found on PATH
	argv       []string // COMMAND and its arguments, as given
	ttl        time.Duration
	grace      time.Duration
	foreground bool
	extended   <-chan struct{} // a value after each extension of the lock
	log        *nodeLog
	addrs      []string
	stdout     io.Writer
	stderr     io.Writer

	sup     *supervised
	cmdPid  int
	status  int            // COMMAND's, once it ended
	ended   bool           // COMMAND ended
	lost    bool           // the lock was lost while the tree ran
	stopSig int            // a signal that stopped COMMAND, which fencedlock did not send
	cont    chan os.Signal // SIGCONT: fencedlock was continued

	owed     answers // what the supervisor owes fencedlock, and by when (enforce.go)
	enforced bool    // an answer was overdue: fencedlock killed the supervisor and the tree
}

// run starts the command, stops its tree if the lock is lost or ctx ends,
// passes signals on, and returns the exit status once the tree is gone and
// the lock was released.
func (r *runner) run(ctx context.Context, sigs chan os.Signal) int {
	l := r.lock
	signal.Notify(sigs, syscall.SIGTSTP) // Ctrl-Z
	r.cont = make(chan os.Signal, 1)
	signal.Notify(r.cont, syscall.SIGCONT) // fg, bg
	defer signal.Stop(r.cont)
	r.log.reset() // from here on, node errors explain a lost lock (lost.go)
	holder := thisHolder(l)
	env := append(os.Environ(),
		"FENCEDLOCK_TOKEN="+strconv.FormatUint(l.Token(), 10),
		"FENCEDLOCK_KEY="+l.Key(),
		"FENCEDLOCK_HOLDER="+holder.Host+":"+strconv.Itoa(holder.PID))
	r.owed.allowance = killAllowance(r.ttl)
	first := r.deadlineOf()
	r.owed.deadline = first.wall
	sup, err := startSupervisor(r.path, r.argv, env, r.foreground, int64(first.boot), r.stdout, r.stderr, r.grace)
	if err == nil {
		err = sup.started()
	}
	if err != nil {
		unlock(l, r.stderr)
		fmt.Fprintf(r.stderr, "fencedlock: %v\n", err)
		return startFailure(err)
	}
	r.sup, r.cmdPid = sup, sup.pid
	defer sup.wait()
	// COMMAND's end, seen by fencedlock itself: the supervisor is to report
	// it (enforce.go), also when it is stopped and reaps nothing.
	cmdEnd, unwatch := watchEnd(sup.pid)
	defer unwatch()
	defer func() {
		if r.owed.timer != nil {
			r.owed.timer.Stop()
		}
	}()

	var (
		lost       = l.Done() // nil once seen closed
		done       = ctx.Done()
		suspending <-chan time.Time
		overdue    <-chan time.Time
	)
	// handle handles one event; false once the supervisor is gone.
	handle := func(e supEvent, ok bool) bool {
		switch {
		case !ok:
			return false
		case e.verb == "suspended" && suspending != nil:
			suspending = nil
			r.stopSelf()
		default:
			r.event(e, suspending != nil)
		}
		return true
	}
	for {
		if !r.enforced {
			overdue = r.owed.arm()
		}
		select {
		case e, ok := <-sup.events:
			if !handle(e, ok) {
				return r.finish()
			}
		case sig := <-sigs:
			switch sig {
			case syscall.SIGTSTP:
				if suspending == nil {
					sup.send("suspend")
					suspending = time.After(suspendWait)
				}
			case syscall.SIGINT, syscall.SIGQUIT:
				if !r.foreground || !terminalForeground() {
					r.signal(sig)
				} // else the terminal sent it to COMMAND's group (ours) already
			default:
				r.signal(sig)
			}
		case <-suspending: // the tree did not confirm: stop anyway, the supervisor carries on
			suspending = nil
			r.stopSelf()
		case <-lost:
			lost = nil
			if !r.lost { // else the tree was killed at the supervisor's deadline, and said so
				r.lost = true
				r.lostByDone()
			}
			r.stop()
		case <-done:
			done = nil
			r.stop()
		case <-overdue:
			// What came in meanwhile counts first: an answer on its way, an
			// extension not yet passed on.
			for more := true; more; {
				select {
				case e, ok := <-sup.events:
					if !handle(e, ok) {
						return r.finish()
					}
				case <-r.extended:
					r.sendDeadline()
				default:
					more = false
				}
			}
			if o, late := r.owed.overdue(); late {
				r.enforce(o)
				overdue = nil
			}
		case <-cmdEnd:
			cmdEnd = nil
			if !r.ended {
				r.owed.exitDue = time.Now().Add(r.owed.allowance)
			}
		case <-r.extended:
			r.sendDeadline()
		}
	}
}

// suspendWait bounds how long Ctrl-Z waits for the tree to stop before
// fencedlock stops itself (the supervisor goes on stopping it).
const suspendWait = 2 * time.Second

// event handles one report of the supervisor.
func (r *runner) event(e supEvent, suspending bool) {
	l := r.lock
	switch e.verb {
	case "exited":
		r.ended = true
		r.owed.exitDue = time.Time{}
		r.status = exitStatus(syscall.WaitStatus(e.a))
		r.stop() // what COMMAND left behind, if anything
	case "leftovers":
		if e.a > 0 {
			fmt.Fprintf(r.stderr, "fencedlock: the command ended but left %d processes running; stopping them: SIGTERM, SIGKILL after %v\n",
				e.a, r.grace)
		}
	case "stopped":
		if suspending || r.lost || r.ended || r.stopSig != 0 { // being stopped already
			return
		}
		r.stopSig = int(e.b)
		sig := syscall.Signal(e.b)
		hint := ""
		if sig == syscall.SIGTTIN || sig == syscall.SIGTTOU {
			hint = " (it used the terminal from the background: run it with --foreground)"
		}
		fmt.Fprintf(r.stderr, "fencedlock: command process %d stopped by %s%s; a stopped command must not hold lock %q: stopping it: SIGTERM, SIGKILL after %v\n",
			e.a, signame(sig), hint, l.Key(), r.grace)
		r.stop()
	case "signalled":
		if len(r.owed.signals) > 0 {
			r.owed.signals = r.owed.signals[1:]
		}
	case "killed":
		if r.owed.killedAt.IsZero() {
			r.owed.killedAt = time.Now()
		}
		switch e.arg {
		case "asked":
		case "deadline":
			r.lost = true
			r.lostByDeadline()
		default:
			fmt.Fprintf(r.stderr, "fencedlock: command still running %v after SIGTERM: SIGKILL\n", r.grace)
		}
	}
}

// stopSelf stops fencedlock (Ctrl-Z), once the tree is stopped. While it is
// stopped the lock is not extended; when it is continued (fg, bg) it resumes
// the tree only if the lock is still valid, else it has the tree killed.
func (r *runner) stopSelf() {
	for len(r.cont) > 0 { // an old SIGCONT, from before this stop
		<-r.cont
	}
	// Any thread may take the signal: kill can return before the process
	// stops. The SIGCONT that follows the stop says it was continued.
	_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
	<-r.cont
	r.owed.resumed()
	l := r.lock
	select {
	case <-l.Done():
	default:
		if r.deadlineOf().wall.After(time.Now()) {
			r.sendDeadline()
			r.sup.send("resume")
			return
		}
	}
	if !r.lost {
		r.lost = true
		fmt.Fprintf(r.stderr, "fencedlock: lock %q (token %d) expired while stopped: killing the command (SIGKILL)\n", l.Key(), l.Token())
	}
	r.kill()
}

// finish releases the lock once the supervisor is gone, and returns the
// exit status.
func (r *runner) finish() int {
	l := r.lock
	switch {
	case r.enforced: // fencedlock killed it and the tree (enforce)
		// First: the supervisor, continued before its kill, may still have
		// reported the tree's end, but it had not answered in time, and
		// the run failed (its message said so).
		if !r.lost {
			unlock(l, r.stderr)
			return exitFailure
		}
	case r.sup.empty: // it saw the tree end
	default:
		fmt.Fprintf(r.stderr, "fencedlock: the supervisor process died: what the command started may still run\n")
		if !r.foreground && r.cmdPid > 0 {
			_ = syscall.Kill(-r.cmdPid, syscall.SIGKILL)
		}
		unlock(l, r.stderr)
		return exitFailure
	}
	if !r.lost {
		select {
		case <-l.Done(): // the lock ended just as the tree did
			r.lost = true
		default:
		}
	}
	if r.lost {
		_ = release(l) // clears what is left on the nodes; ErrLockLost is expected
		fmt.Fprintf(r.stderr, "fencedlock: command ended (%s) after lock %q was lost: exit status %d\n",
			describeStatus(r.status, r.ended), l.Key(), exitLockLost)
		return exitLockLost
	}
	unlock(l, r.stderr)
	if r.stopSig != 0 {
		return 128 + r.stopSig
	}
	return r.status
}

// unlock releases l; a failure is reported, not fatal: the TTL cleans up.
func unlock(l *redlock.Lock, stderr io.Writer) {
	if err := release(l); err != nil {
		fmt.Fprintf(stderr, "fencedlock: warning: release of lock %q: %v (it expires by itself)\n", l.Key(), err)
	}
}

// release unlocks l, even when the command's ctx has ended (the nodes' own
// timeouts bound it; the 5s is a backstop).
func release(l *redlock.Lock) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return l.Unlock(ctx)
}

// exitStatus is a shell's $? for a wait status: 128+n when signal n killed
// the process.
func exitStatus(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// describeStatus says how COMMAND ended, for messages.
func describeStatus(status int, ended bool) string {
	switch {
	case !ended:
		return "its end not seen"
	case status > 128:
		return "signal: " + signame(syscall.Signal(status-128))
	}
	return "exit status " + strconv.Itoa(status)
}

// deadline is a moment on the boot clock, which the supervisor shares, and
// on fencedlock's.
type deadline struct {
	boot time.Duration
	wall time.Time
}

// deadlineOf is when the supervisor kills the tree unless fencedlock has
// extended the lock by then: two kill allowances (a fifth of the TTL)
// before its validity ends, one for its kill and one for fencedlock's, should
// the supervisor not report its own (enforce.go). The lock is extended at
// about a third of the TTL.
func (r *runner) deadlineOf() deadline {
	left := time.Until(r.lock.Until()) - 2*killAllowance(r.ttl)
	return deadline{boot: bootNow() + left, wall: time.Now().Add(left)}
}

func startFailure(err error) int {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return exitNotFound
	}
	return exitCannotExec
}

func signum(s os.Signal) int {
	if n, ok := s.(syscall.Signal); ok {
		return int(n)
	}
	return 0
}

// syncWriters makes writes to stdout and stderr safe to mix: fencedlock's
// messages and the copies of the command's output (which exec makes when a
// writer is not a file) then take turns.
func syncWriters(stdout, stderr io.Writer) (io.Writer, io.Writer) {
	mu := new(sync.Mutex)
	wrap := func(w io.Writer) io.Writer {
		if _, ok := w.(*os.File); ok {
			return w // the command writes to the file itself
		}
		return &lockedWriter{mu: mu, w: w}
	}
	return wrap(stdout), wrap(stderr)
}

type lockedWriter struct {
	mu *sync.Mutex // shared by stdout and stderr; protects w
	w  io.Writer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

// signame is "SIGTERM" for SIGTERM.
func signame(s syscall.Signal) string {
	if n := unix.SignalName(s); n != "" {
		return n
	}
	return "signal " + strconv.Itoa(int(s))
}

// terminalForeground reports whether fencedlock's process group is the
// foreground group of its terminal. Then a SIGINT or SIGQUIT it gets came
// from the keyboard, which sends it to the whole group: with --foreground,
// COMMAND got it already.
func terminalForeground() bool {
	tty, err := os.Open("/dev/tty")
	if err != nil {
		return false
	}
	defer tty.Close()
	pgrp, err := unix.IoctlGetInt(int(tty.Fd()), unix.TIOCGPGRP)
	return err == nil && pgrp == unix.Getpgrp()
}
