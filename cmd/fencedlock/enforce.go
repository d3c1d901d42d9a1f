package main

import (
	"fmt"
	"os"
	"syscall"
	"time"
)

// The process that holds the lock enforces its end. One rule does it: every
// answer fencedlock needs from the supervisor is due a kill allowance after
// the supervisor had cause to give it, and one that is not in by then is
// taken for a supervisor that does not answer (stopped by kill -STOP, a
// debugger or strace, or hung): fencedlock ends the tree itself (enforce).
// What the supervisor owes:
//
//   - a report that it killed the tree ("killed"), at its deadline (the
//     last fencedlock sent it), at the end of a stop's grace, or at once on
//     a kill, whichever is first;
//   - once it killed, its end ("empty"): the kill is given the allowance to
//     take effect;
//   - a report that it passed on a signal ("signalled");
//   - a report that COMMAND ended ("exited"), once fencedlock saw it end
//     (on Linux, where it can).
//
// The supervisor's deadline is two allowances before the lock's validity
// ends (deadlineOf): its kill is given one, and fencedlock's own kill, if the
// supervisor did not report its own, the other. So COMMAND never outlives
// the lock's validity (Until), whether the supervisor answers or not, as
// long as a kill takes effect within its allowance.

// killAllowance is the time a kill of the tree is given to take effect, and
// the supervisor to answer: a tenth of the TTL.
func killAllowance(ttl time.Duration) time.Duration { return ttl / 10 }

// answers is what the supervisor owes fencedlock (see above), and the timer
// that holds it to it.
type answers struct {
	allowance time.Duration
	deadline  time.Time     // the supervisor's, as last sent; it is to kill then
	killAsked time.Time     // a stop or kill asked it to kill by then; zero: none
	asked     string        // "stop" or "kill", for the message
	askedFor  time.Duration // how long the stop or kill was given, for the message
	killedAt  time.Time     // it reported a kill; zero: not yet
	signals   []owedSignal  // forwarded signals not yet confirmed, oldest first
	exitDue   time.Time     // COMMAND was seen to end and the supervisor has not said so; zero: not seen
	notBefore time.Time     // nothing is due before: fencedlock was stopped itself until an allowance earlier
	timer     *time.Timer
}

type owedSignal struct {
	due  time.Time
	name string
}

// owedAnswer is one answer the supervisor owes: when it is due, and what it
// is, for the message.
type owedAnswer struct {
	at       time.Time
	what     string
	deadline bool // the kill at its deadline: the lock was not extended in time
}

// next is the earliest answer owed.
func (a *answers) next() owedAnswer {
	var next owedAnswer
	consider := func(o owedAnswer) {
		if !o.at.IsZero() && (next.at.IsZero() || o.at.Before(next.at)) {
			next = o
		}
	}
	switch {
	case !a.killedAt.IsZero():
		consider(owedAnswer{at: a.killedAt.Add(a.allowance),
			what: fmt.Sprintf("end the tree within %v of its kill", a.allowance)})
	case !a.killAsked.IsZero() && a.killAsked.Before(a.deadline):
		consider(owedAnswer{at: a.killAsked.Add(a.allowance),
			what: fmt.Sprintf("confirm the %s within %v", a.asked, a.askedFor+a.allowance)})
	default:
		consider(owedAnswer{at: a.deadline.Add(a.allowance), deadline: true,
			what: fmt.Sprintf("confirm the stop due at its deadline, %v before the lock's validity ends", 2*a.allowance)})
	}
	if len(a.signals) > 0 {
		consider(owedAnswer{at: a.signals[0].due, what: fmt.Sprintf("confirm %s within %v", a.signals[0].name, a.allowance)})
	}
	consider(owedAnswer{at: a.exitDue, what: fmt.Sprintf("report the command's end within %v", a.allowance)})
	if next.at.Before(a.notBefore) {
		next.at = a.notBefore
	}
	return next
}

// resumed notes that fencedlock was continued after it stopped itself:
// stopped, it held the supervisor to nothing, so whatever fell due
// meanwhile is given an allowance from now.
func (a *answers) resumed() { a.notBefore = time.Now().Add(a.allowance) }

// arm sets the timer to the earliest answer owed, and returns its channel.
func (a *answers) arm() <-chan time.Time {
	d := time.Until(a.next().at)
	if a.timer == nil {
		a.timer = time.NewTimer(d)
	} else {
		a.timer.Reset(d)
	}
	return a.timer.C
}

// overdue returns the earliest answer owed, if it is overdue.
func (a *answers) overdue() (owedAnswer, bool) {
	next := a.next()
	return next, !time.Now().Before(next.at)
}

// askKill notes that the supervisor was asked to kill the tree by at,
// given d; a kill asked for earlier stands.
func (a *answers) askKill(at time.Time, what string, d time.Duration) {
	if a.killAsked.IsZero() || at.Before(a.killAsked) {
		a.killAsked, a.asked, a.askedFor = at, what, d
	}
}

// stop asks the supervisor to stop the tree: SIGTERM, then SIGKILL after
// --grace (or at its deadline, if that comes first).
func (r *runner) stop() {
	r.sup.send("stop %d", r.grace)
	r.owed.askKill(time.Now().Add(r.grace), "stop", r.grace)
}

// kill asks the supervisor to kill the tree now.
func (r *runner) kill() {
	r.sup.send("kill")
	r.owed.askKill(time.Now(), "kill", 0)
}

// signal asks the supervisor to pass sig on to COMMAND.
func (r *runner) signal(sig os.Signal) {
	r.sup.send("signal %d", signum(sig))
	r.owed.signals = append(r.owed.signals,
		owedSignal{due: time.Now().Add(r.owed.allowance), name: signame(syscall.Signal(signum(sig)))})
}

// sendDeadline tells the supervisor the lock's validity as it is now.
func (r *runner) sendDeadline() {
	d := r.deadlineOf()
	r.sup.send("deadline %d", int64(d.boot))
	r.owed.deadline = d.wall
}

// enforce ends the tree without the supervisor: SIGKILL to each process
// below it, to COMMAND's process group (COMMAND alone with --foreground:
// the group is fencedlock's), then SIGCONT and SIGKILL to the supervisor.
// The tree is signalled before the supervisor dies: while it lives, even
// stopped, it is the subreaper every orphan of the tree goes to, so no
// process found in /proc can slip out to init in between. COMMAND is
// signalled by pid only until the supervisor reported it ended (a stopped
// supervisor reaps nothing), so the pid is not another process's. The
// supervisor is continued before it is killed: should the kill not reach
// it, a running supervisor still ends the tree at its own deadline. Once it
// is gone, the events end and the run finishes.
func (r *runner) enforce(o owedAnswer) {
	r.enforced = true
	if o.deadline {
		// Not extended in time, the lock ends within the allowance: lost, as
		// when the supervisor kills at its deadline.
		r.lost = true
	}
	sup := r.sup.cmd.Process
	fmt.Fprintf(r.stderr, "fencedlock: the supervisor (pid %d) did not %s: killing it and the command's processes (SIGKILL)\n",
		sup.Pid, o.what)
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
