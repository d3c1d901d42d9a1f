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
runs. COMMAND gets FENCEDLOCK_TOKEN (the fencing token: pass it to the
storage you write to), FENCEDLOCK_KEY and FENCEDLOCK_HOLDER (host:pid of
this fencedlock, which 'fencedlock status' shows as the holder) in its
environment. --wait D waits up to D for a held lock; --wait forever waits
until it is acquired, or a signal (see below) ends the wait. A node that
does not answer is named on stderr, also when the lock is held without it,
and fewer than 3 nodes draw a warning (no node of them may fail);
'fencedlock doctor' checks the nodes' configuration.

COMMAND runs under a supervisor process (fencedlock-supervisor, a child of
fencedlock in a process group of its own). On Linux it is a child subreaper:
every process COMMAND starts stays below it, also one that double-forks or
calls setsid, since an orphan is re-parented to the supervisor, not to init.
The tree is all of them, and the lock is released only once it is gone:
  - COMMAND exits: what it left running gets SIGTERM, then SIGKILL after
    --grace; the exit status is COMMAND's.
  - The lock is lost (an extension finds it on fewer than a majority of
    the nodes): the whole tree gets SIGTERM and SIGCONT, then SIGKILL
    after --grace (exit 70).
  - Extensions fail (nodes down, unreachable or slow): they are retried
    while validity is left. If none succeeds by the supervisor's deadline
    (below), the supervisor kills the tree with SIGKILL (exit 70; the
    message names the nodes that failed).
  - The supervisor does not answer in time: it is stopped (kill -STOP, a
    debugger, strace) or hung. Each answer fencedlock needs from it is due
    a tenth of --ttl (the time a kill is given) after the supervisor had
    cause to give it: that it killed the tree (unless the tree is gone) at
    its deadline, at the end of --grace after a stop, or at once when told
    to; that the tree is gone, after its kill; that it passed a signal on;
    that COMMAND ended, which on Linux fencedlock sees itself. fencedlock, which holds the
    lock, then ends the tree itself: SIGKILL to every process below the
    supervisor and to COMMAND's process group, then SIGCONT and SIGKILL to
    the supervisor (exit 70 if the lock was lost or not extended by the
    supervisor's deadline, else 1).
  - fencedlock dies, even by kill -9: the supervisor kills the tree with
    SIGKILL at once. If fencedlock is stopped or frozen instead, the
    supervisor kills the tree at its deadline: a fifth of --ttl before the
    lock's validity, as fencedlock last extended it, runs out. That also
    bounds --grace. A tenth of --ttl is for its kill, the other tenth for
    fencedlock's should the supervisor not report its own: so COMMAND
    never outlives the lock's validity, whether the supervisor answers or
    not, as long as each kill takes effect within a tenth of --ttl.
  - Ctrl-Z (SIGTSTP to fencedlock): the tree is stopped with SIGSTOP, then
    fencedlock stops. The lock is not extended meanwhile: on fg or bg the
    tree continues if the lock is still valid, else it was killed (exit 70).
  - COMMAND, or an orphan the supervisor adopted, is stopped by a signal
    fencedlock did not send: SIGTTIN or SIGTTOU (it used the terminal from
    the background: use --foreground), SIGSTOP or SIGTSTP from someone
    else. A stopped command must not hold the lock: the tree is stopped as
    on a lost lock, and the exit status is 128+n.
What escapes: processes started outside the tree on COMMAND's behalf (by a
service manager such as systemd-run, by cron or at, by a container runtime,
by ssh on another host, by any server COMMAND asks); the tree below COMMAND
if the supervisor itself is killed (COMMAND dies with it and, unless
--foreground, so does its process group; the rest runs on); when fencedlock
ends the tree itself, a process that left COMMAND's process group and was
forked after fencedlock read the tree from /proc; a process that a SIGKILL
does not end at once (in uninterruptible sleep, as on a hung network file
system), for as long as it takes; on systems other than Linux, every
process that leaves COMMAND's process group, and COMMAND's end while the
supervisor is stopped (the lock is held until the supervisor runs again).
Nothing ends the tree while fencedlock and the supervisor are both stopped,
or while the supervisor is stopped after fencedlock died: then only the
fencing token protects the store. A process deeper in the tree that stops
while its parent lives (a pipeline stage reading the terminal) is reported
to that parent, not to fencedlock: the tree then holds the lock until it
ends. When fencedlock ends the tree itself, the exit status is 70 or 1,
whatever COMMAND's.

SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to fencedlock are passed on to
COMMAND's process group, by the supervisor: one it does not confirm within
a tenth of --ttl ends the tree as above (SIGKILL). COMMAND runs in a group
of its own unless --foreground: then it stays in fencedlock's group so that
it can use the terminal, signals are passed on to COMMAND alone, a Ctrl-C
or Ctrl-\ that the terminal sent to the group is not passed on a second
time, Ctrl-Z gives that group a second to stop by itself (to restore the
screen), and fg continues it before fencedlock can check the lock.
`

const runFooter = nodesEnvHelp + `
Exit status:
  COMMAND's status  the lock was held until COMMAND ended (killed by signal n: 128+n)
  1                 the supervisor process died (what COMMAND started may run
                    on), or did not answer in time and fencedlock ended the
                    tree itself with the lock still valid
  2                 bad usage
  69                too few nodes answered to acquire the lock (the message names them)
  70                the lock was lost while COMMAND ran, which was then stopped
                    (whatever COMMAND's own status; the message gives it)
  75                the lock is held by someone else (also when --wait ran out)
  126, 127          COMMAND could not be started, or was not found
  128+n             fencedlock got signal n while waiting for the lock, or COMMAND
                    was stopped by signal n (149: SIGTTIN) and then killed
`

// The backoff of --wait: a release wakes a waiter at once (pub/sub); the
// backoff is only the net for a wake-up that never comes.
const (
	retryBase = 16 * time.Millisecond
	retryCap  = 512 * time.Millisecond
)

// forwarded are the signals passed on to the command.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

type runFlags struct {
	nodeFlags
	ttl        time.Duration
	wait       waitFlag
	grace      time.Duration
	foreground bool
}

// runWithLock is `fencedlock run`.
func runWithLock(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("run", runHeader, runFooter)
	var f runFlags
	f.register(c.fs)
	c.fs.DurationVar(&f.ttl, "ttl", 10*time.Second, "lock time-to-live; extended while COMMAND runs")
	c.fs.Var(&f.wait, "wait", "wait up to `D` for the lock, or forever (default 0: one attempt, exit 75 if held)")
	c.fs.DurationVar(&f.grace, "grace", 5*time.Second, "after SIGTERM to the tree, wait this long before SIGKILL")
	c.fs.BoolVar(&f.foreground, "foreground", false, "keep COMMAND in fencedlock's process group, so it can use the terminal; signals then reach COMMAND only")
	if code, ok := c.parse(args, stdout, stderr); !ok {
		return code
	}
	opts, err := f.options(os.Getenv)
	argv := c.fs.Args()
	switch {
	case err != nil:
		return c.fail(stderr, "%v", err)
	case f.ttl <= 0:
		return c.fail(stderr, "--ttl %v is not positive", f.ttl)
	case f.wait.d < 0:
		return c.fail(stderr, "--wait %v is negative", f.wait.d)
	case f.grace < 0:
		return c.fail(stderr, "--grace %v is negative", f.grace)
	case len(argv) == 0:
		return c.fail(stderr, "no command to run (give it after --)")
	}
	stdout, stderr = syncWriters(stdout, stderr)

	path, err := exec.LookPath(argv[0])
	if err != nil { // fail before taking the lock
		fmt.Fprintf(stderr, "fencedlock: %v\n", err)
		return startFailure(err)
	}

	// Registered before the lock is taken, so no signal is lost in between.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)

	clients := dial(opts)
	defer closeAll(clients)
	warnTolerance(stderr, "run", len(clients))
	probeCtx, stopProbe := context.WithCancel(ctx)
	defer stopProbe()
	probe := probeNodes(probeCtx, clients, f.timeout) // reach.go: reported once the lock is held
	log := &nodeLog{}
	extended, refresh := make(chan struct{}, 1), make(chan struct{}, 1)
	locks, err := redlock.New(universal(clients), redlock.WithObserver(&runObserver{nodeLog: log, extended: extended, refresh: refresh}),
		redlock.WithRetry(redlock.ExponentialBackoff(retryBase, retryCap)))
	if err != nil {
		return c.fail(stderr, "%v", err)
	}
	defer locks.Close()

	l, code := acquire(ctx, c, locks, &f, addrsOf(opts), log, sigs, stderr)
	if l == nil { // acquire named the nodes that failed
		stopProbe()
		<-probe
		return code
	}
	defer reportProbe(probe, "run", stderr)()
	recordCtx, stopRecord := context.WithCancel(ctx)
	recorded := recordHolder(recordCtx, clients, l, refresh, f.timeout) // holder.go: for status
	defer func() { stopRecord(); <-recorded }()
	r := runner{lock: l, path: path, argv: argv, ttl: f.ttl, grace: f.grace, foreground: f.foreground, extended: extended,
		log: log, addrs: addrsOf(opts), stdout: stdout, stderr: stderr}
	return r.run(ctx, sigs)
}

// runObserver tells the runner when the lock was extended, so that it can
// pass the new end of validity to the supervisor, and the holder record
// that it lasts longer (holder.go). Its nodeLog keeps the
// node errors since the last extension: those of the extensions that
// failed, which explain a lock lost (lost.go).
type runObserver struct {
	*nodeLog
	extended chan struct{} // buffered: one pending value is enough
	refresh  chan struct{} // likewise
}

func (o *runObserver) Extended(string, uint64) {
	o.reset()
	for _, ch := range []chan struct{}{o.extended, o.refresh} {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
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
		switch {
		case f.wait.forever:
			r.l, r.err = locks.Lock(actx, f.key, f.ttl, redlock.AutoExtend())
		case f.wait.d > 0:
			wctx, cancel := context.WithTimeout(actx, f.wait.d)
			defer cancel()
			r.l, r.err = locks.Lock(wctx, f.key, f.ttl, redlock.AutoExtend())
		default:
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
	if f.wait.d > 0 {
		fmt.Fprintf(stderr, "fencedlock: lock %q is held by someone else (waited %v)\n", f.key, f.wait.d)
	} else {
		fmt.Fprintf(stderr, "fencedlock: lock %q is held by someone else\n", f.key)
	}
	return nil, exitTempFail
}

// waitFlag is --wait: a duration, or "forever".
type waitFlag struct {
	d       time.Duration
	forever bool
}

func (w *waitFlag) String() string {
	if w.forever {
		return "forever"
	}
	return w.d.String()
}

func (w *waitFlag) Set(s string) error {
	if s == "forever" {
		*w = waitFlag{forever: true}
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return errors.New(`not a duration (e.g. 30s, 5m) or "forever"`)
	}
	*w = waitFlag{d: d}
	return nil
}
