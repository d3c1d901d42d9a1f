package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fencedlock/fencedlock/redlock"
)

// runner runs the command under the lock.
type runner struct {
	cmd    *exec.Cmd
	lock   *redlock.Lock
	grace  time.Duration
	group  bool // signal the command's process group, not just the command
	log    *nodeLog
	addrs  []string
	stderr io.Writer
}

// run starts the command, stops it if the lock is lost or ctx ends, passes
// signals on, and returns the exit status once the command ended and the
// lock was released.
func (r *runner) run(ctx context.Context, sigs <-chan os.Signal) int {
	l := r.lock
	r.cmd.Env = append(os.Environ(),
		"FENCEDLOCK_TOKEN="+strconv.FormatUint(l.Token(), 10),
		"FENCEDLOCK_KEY="+l.Key())
	r.log.reset() // from here on, node errors explain a lost lock
	if err := r.cmd.Start(); err != nil {
		unlock(l, r.stderr)
		fmt.Fprintf(r.stderr, "fencedlock: %v\n", err)
		return startFailure(err)
	}
	exited := make(chan struct{})
	go func() { _ = r.cmd.Wait(); close(exited) }() // cmd.ProcessState tells the status

	var (
		lost     = l.Done() // nil once seen closed
		wasLost  bool
		done     = ctx.Done()
		killTick <-chan time.Time
		kill     *time.Timer
	)
	stop := func() { // SIGTERM now, SIGKILL after the grace period
		r.signal(syscall.SIGTERM)
		if kill == nil {
			kill = time.NewTimer(r.grace)
			killTick = kill.C
		}
	}
	defer func() {
		if kill != nil {
			kill.Stop()
		}
	}()
	for exited != nil {
		select {
		case <-exited:
			exited = nil
		case sig := <-sigs:
			if s, ok := sig.(syscall.Signal); ok {
				r.signal(s)
			}
		case <-lost:
			lost, wasLost = nil, true
			why := ""
			if failed := r.log.failed(r.addrs); len(failed) > 0 {
				why = " (" + strings.Join(failed, "; ") + ")"
			}
			fmt.Fprintf(r.stderr, "fencedlock: lock %q (token %d) lost while the command ran%s; stopping it: SIGTERM, SIGKILL after %v\n",
				l.Key(), l.Token(), why, r.grace)
			stop()
		case <-done:
			done = nil
			stop()
		case <-killTick:
			killTick = nil
			fmt.Fprintf(r.stderr, "fencedlock: command still running %v after SIGTERM: SIGKILL\n", r.grace)
			r.signal(syscall.SIGKILL)
		}
	}
	status := exitStatus(r.cmd.ProcessState)
	if !wasLost {
		select {
		case <-lost: // the lock ended just as the command did
			wasLost = true
		default:
		}
	}
	if wasLost {
		if r.group {
			_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL) // what the command left behind
		}
		_ = release(l) // clears what is left on the nodes; ErrLockLost is expected
		fmt.Fprintf(r.stderr, "fencedlock: command ended (%s) after lock %q was lost: exit status %d\n",
			r.cmd.ProcessState, l.Key(), exitLockLost)
		return exitLockLost
	}
	unlock(l, r.stderr)
	return status
}

// signal sends sig to the command (its process group unless --foreground).
func (r *runner) signal(sig syscall.Signal) {
	if r.group {
		_ = syscall.Kill(-r.cmd.Process.Pid, sig)
		return
	}
	_ = r.cmd.Process.Signal(sig)
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

// exitStatus is a shell's $? for a finished process: 128+n when signal n
// killed it.
func exitStatus(ps *os.ProcessState) int {
	if ps == nil {
		return exitFailure
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
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
