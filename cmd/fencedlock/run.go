package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/fencedlock/fencedlock/redlock"
)

const runHeader = `Usage: fencedlock run --nodes ADDRS --key KEY [flags] -- COMMAND [ARGS...]

Acquire KEY on a majority of the nodes, run COMMAND while holding it, then
release it. The lock is extended at about a third of --ttl while COMMAND
runs; if fencedlock dies, the lock expires --ttl later (and, on Linux,
COMMAND is killed: it must not run on without the lock). COMMAND gets
FENCEDLOCK_TOKEN (the fencing token: pass it to the storage you write to) and
FENCEDLOCK_KEY in its environment.

If the lock is lost while COMMAND runs (extensions fail, validity runs out),
COMMAND gets SIGTERM, then SIGKILL after --grace, and fencedlock exits 70.
SIGINT, SIGTERM and SIGHUP sent to fencedlock are passed on to COMMAND.
COMMAND runs in its own process group, and signals go to the whole group,
unless --foreground.
`

const runFooter = `Exit status:
  COMMAND's status  the lock was held until COMMAND ended (killed by signal n: 128+n)
  2                 bad usage
  69                too few nodes answered to acquire the lock (the message names them)
  70                the lock was lost while COMMAND ran, which was then stopped
                    (whatever COMMAND's own status; the message gives it)
  75                the lock is held by someone else (also when --wait ran out)
  126, 127          COMMAND could not be started, or was not found
  128+n             fencedlock got signal n while waiting for the lock
`

// forwarded are the signals passed on to the command.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}

type runFlags struct {
	nodeFlags
	ttl        time.Duration
	wait       time.Duration
	grace      time.Duration
	foreground bool
}

// runWithLock is `fencedlock run`.
func runWithLock(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("run", runHeader, runFooter)
	var f runFlags
	f.register(c.fs)
	c.fs.DurationVar(&f.ttl, "ttl", 10*time.Second, "lock time-to-live; extended while COMMAND runs")
	c.fs.DurationVar(&f.wait, "wait", 0, "wait up to this long for the lock (default 0: one attempt, exit 75 if held)")
	c.fs.DurationVar(&f.grace, "grace", 5*time.Second, "after SIGTERM on a lost lock, wait this long before SIGKILL")
	c.fs.BoolVar(&f.foreground, "foreground", false, "keep COMMAND in fencedlock's process group, so it can read the terminal; signals then reach COMMAND only")
	if code, ok := c.parse(args, stdout, stderr); !ok {
		return code
	}
	opts, err := f.options()
	argv := c.fs.Args()
	switch {
	case err != nil:
		return c.fail(stderr, "%v", err)
	case f.ttl <= 0:
		return c.fail(stderr, "--ttl %v is not positive", f.ttl)
	case f.wait < 0:
		return c.fail(stderr, "--wait %v is negative", f.wait)
	case f.grace < 0:
		return c.fail(stderr, "--grace %v is negative", f.grace)
	case len(argv) == 0:
		return c.fail(stderr, "no command to run (give it after --)")
	}
	stdout, stderr = syncWriters(stdout, stderr)

	if _, err := exec.LookPath(argv[0]); err != nil { // fail before taking the lock
		fmt.Fprintf(stderr, "fencedlock: %v\n", err)
		return startFailure(err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	cmd.SysProcAttr = childAttr(!f.foreground)
	cmd.WaitDelay = max(f.grace, time.Second) // output pipes held open by grandchildren

	// Registered before the lock is taken, so no signal is lost in between.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)

	clients := dial(opts)
	defer closeAll(clients)
	log := &nodeLog{}
	locks, err := redlock.New(universal(clients), redlock.WithObserver(log))
	if err != nil {
		return c.fail(stderr, "%v", err)
	}
	defer locks.Close()

	l, code := acquire(ctx, c, locks, &f, addrsOf(opts), log, sigs, stderr)
	if l == nil {
		return code
	}
	r := runner{cmd: cmd, lock: l, grace: f.grace, group: !f.foreground, log: log, addrs: addrsOf(opts), stderr: stderr}
	return r.run(ctx, sigs)
}

// acquire takes the lock (waiting up to f.wait). On failure it returns nil
// and the exit status, having said why on stderr.
func acquire(ctx context.Context, c *command, locks *redlock.Client, f *runFlags, addrs []string, log *nodeLog,
	sigs <-chan os.Signal, stderr io.Writer) (*redlock.Lock, int) {
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		l   *redlock.Lock
		err error
	}
	res := make(chan result, 1)
	go func() {
		var r result
		if f.wait > 0 {
			wctx, cancel := context.WithTimeout(actx, f.wait)
			defer cancel()
			r.l, r.err = locks.Lock(wctx, f.key, f.ttl, redlock.AutoExtend())
		} else {
			r.l, r.err = locks.TryLock(actx, f.key, f.ttl, redlock.AutoExtend())
		}
		res <- r
	}()
	var r result
	select {
	case r = <-res:
	case sig := <-sigs:
		cancel()
		if r = <-res; r.l != nil { // acquired just as the signal came
			unlock(r.l, stderr)
		}
		fmt.Fprintf(stderr, "fencedlock: %v while waiting for lock %q\n", sig, f.key)
		return nil, 128 + signum(sig)
	}
	if r.err == nil {
		return r.l, exitOK
	}
	failed := log.failed(addrs)
	quorum := locks.Quorum()
	switch {
	case errors.Is(r.err, redlock.ErrInvalidArgument): // e.g. a ttl too short to leave validity
		return nil, c.fail(stderr, "%v", r.err)
	case ctx.Err() != nil:
		fmt.Fprintf(stderr, "fencedlock: lock %q not acquired: %v\n", f.key, ctx.Err())
		return nil, exitFailure
	case len(addrs)-len(failed) < quorum:
		fmt.Fprintf(stderr, "fencedlock: lock %q not acquired: %d of %d nodes failed, a lock needs %d:\n  %s\n",
			f.key, len(failed), len(addrs), quorum, strings.Join(failed, "\n  "))
		return nil, exitUnavailable
	}
	for _, s := range failed { // enough nodes answered, but say which did not
		fmt.Fprintf(stderr, "fencedlock: warning: %s\n", s)
	}
	if f.wait > 0 {
		fmt.Fprintf(stderr, "fencedlock: lock %q is held by someone else (waited %v)\n", f.key, f.wait)
	} else {
		fmt.Fprintf(stderr, "fencedlock: lock %q is held by someone else\n", f.key)
	}
	return nil, exitTempFail
}
