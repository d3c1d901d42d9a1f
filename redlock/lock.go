package redlock

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Lock is one hold of a key on a quorum of nodes. It is safe for concurrent
// use.
//
// What is not guaranteed: the hold can end before Unlock — the TTL runs out,
// a process pause outlasts the validity, nodes lose their data. Done() tells
// when the client knows it ended, but a paused holder cannot know. Protect
// writes with Token() and a fencing Guard on the storage side: that is what
// keeps a former holder from doing harm.
type Lock struct {
	a     *attempt
	token uint64
	nodes []int // the nodes whose grants made the token, ascending; set before the Lock is returned

	acquired time.Time // on the client's clock, when the attempt succeeded; set before the Lock is returned

	mu        sync.Mutex // protects the fields below
	until     time.Time
	ended     bool      // done is closed
	lost      bool      // the hold ended other than by Unlock, or Unlock found it gone
	unlocked  bool      // Unlock was called
	watched   bool      // Done() was asked for: the scheduler ends the hold at until
	auto      bool      // AutoExtend: the scheduler extends it (see watchdog.go)
	extending bool      // the watchdog's extension is on its way
	extendAt  time.Time // the watchdog's next extension; zero: none (see retryAtLocked)
	done      chan struct{}
	leases    map[uint64]context.CancelCauseFunc // the Leases still open, cancelled when the hold ends
	leaseSeq  uint64                             // the id of the last Lease
	// reacquiring: an Extend that may re-create the key was sent
	// (WithReacquireOnExtend), so Unlock goes to every node;
	// reacquired: the nodes where one did, in order (see Reacquired).
	reacquiring bool
	reacquired  []int

	sched schedEntry // the hold's place in its Client's scheduler

	// serial is held (a token in it) by the Extend or Unlock that is
	// sending, so that they reach the nodes in the order they were made.
	serial chan struct{}
}

func newLock(a *attempt, token uint64, until time.Time) *Lock {
	return &Lock{a: a, token: token, until: until, done: make(chan struct{}), serial: make(chan struct{}, 1)}
}

// Key is the locked key, exactly as given (so `redis-cli PTTL key` works).
func (l *Lock) Key() string { return l.a.key() }

// Value is the random value that marks this hold on the nodes.
func (l *Lock) Value() string { return l.a.value }

// Token is the fencing token: > 0, and larger than the token of every hold of
// this key that was acquired before this one's attempt began.
func (l *Lock) Token() uint64 { return l.token }

// Nodes returns the indexes (into the nodes given to [New]) of the nodes
// whose grants made this hold and its token: those whose fence counter was
// the highest among the grants, and those raised to it before the acquire
// returned. They are a quorum, in ascending order; the hold may be on more
// nodes (grants that were not needed, or came late). A chaos history
// records them, so that a checker can tell which holds a node's failure
// could reach. The slice is the caller's.
func (l *Lock) Nodes() []int { return slices.Clone(l.nodes) }

// Reacquired returns the indexes of the nodes on which an Extend of this hold
// re-created its key ([WithReacquireOnExtend]), in the order the nodes
// answered, one entry per re-create: a node that lost the key twice is
// listed twice. A re-create whose answer came after its Extend had decided
// is listed too; one whose answer never came (the call timed out, and no
// reply followed) is not, though the key may be back on the node: a later
// extension finds it there and extends it. Without the option it is always
// empty. A chaos history
// records it, so that a checker can tell a re-create within validity from a
// hold brought back after it ended. The slice is the caller's.
func (l *Lock) Reacquired() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.reacquired)
}

// Until is the end of validity on the client's clock: after it, another
// client may acquire the key.
func (l *Lock) Until() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until
}

// TTL is the validity left now, on the client's clock; ≤ 0 once it ran out.
func (l *Lock) TTL() time.Duration { return l.Until().Sub(l.a.c.cfg.clock.Now()) }

// Done is closed when the hold ends: Unlock, its validity ran out, an
// Extend of the caller's returned [ErrLockLost], the watchdog found it gone
// (see [AutoExtend]), or the Client was closed. Asking for it costs no
// goroutine: the Client's one scheduler closes it at Until.
func (l *Lock) Done() <-chan struct{} {
	l.mu.Lock()
	if l.ended || l.watched {
		l.mu.Unlock()
		return l.done
	}
	l.watched = true
	scheduled := l.scheduleLocked()
	l.mu.Unlock()
	if !scheduled { // the Client is closed
		l.end(true)
	}
	return l.done
}

// scheduleLocked gives the scheduler what is next due for the hold: the
// end of its validity, or before it the watchdog's next extension; nothing
// once it ended, or when nobody watches it. It reports false when the
// Client is closed (the caller ends the hold). l.mu is held.
func (l *Lock) scheduleLocked() bool {
	s := &l.a.c.sched
	if l.ended || (!l.watched && !l.auto) {
		s.remove(l)
		return true
	}
	due := l.until
	if l.auto && !l.extending && !l.extendAt.IsZero() && l.extendAt.Before(due) {
		due = l.extendAt
	}
	return s.set(l, due)
}

// unlockCalled reports whether Unlock was called.
func (l *Lock) unlockCalled() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.unlocked
}

// endedLost reports whether the hold ended other than by Unlock, or Unlock
// found it lost.
func (l *Lock) endedLost() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// end closes done once; lost says whether the hold ended other than by Unlock.
func (l *Lock) end(lost bool) {
	l.mu.Lock()
	if l.ended {
		l.mu.Unlock()
		return
	}
	l.ended, l.lost = true, lost
	close(l.done)
	l.a.c.sched.remove(l)
	leases := l.endLeasesLocked()
	l.mu.Unlock()
	cancelLeases(leases, lost)
	c := l.a.c
	if lost {
		c.cfg.observer.Lost(l.a.key(), l.token)
		c.cfg.logger.Warn("redlock: lock lost", "key", l.a.key(), "token", l.token)
	}
	if c.cfg.hooks.hold {
		c.cfg.observer.(safeObserver).HoldEnded(l.a.key(), l.token, c.cfg.clock.Since(l.acquired))
	}
}

// Extend sets the hold's TTL to ttl on a quorum of nodes, only where the key
// still holds this hold's value (a vanished key is never re-created, unless
// the Client has [WithReacquireOnExtend]: then only while the validity
// lasts, and only where no other value holds the key). On
// success Until moves to the attempt's start + ttl − drift. When a quorum
// says the hold is gone (refused), or no validity would be left, Extend
// returns ErrLockLost and Done closes; so it does, without a call, once the
// Client's Close began. When nodes failed and the rest left the outcome
// open, it returns [ErrOutcomeUnknown] with their [*NodeError]s, and the
// hold goes on until Until (Done closes then, unless an Extend succeeds).
//
// If ctx ends before the outcome is known, Extend returns
// [ErrOutcomeUnknown] joined with ctx.Err(). The
// calls already sent may land whatever Extend returns, so Until becomes the
// earlier of its previous value and what the new ttl gives as soon as they
// go out, and moves later only on success: it is never later than what a
// quorum of nodes may still hold. A handle's Extends and its Unlock reach
// the nodes in the order the handle applies them: one waits for the other.
func (l *Lock) Extend(ctx context.Context, ttl time.Duration) error {
	if err := l.a.c.checkArgs(l.a.key(), ttl); err != nil {
		return err
	}
	return l.extend(ctx, ttl)
}

// extend is Extend, for the caller and the watchdog alike. Node failures
// that leave a quorum neither confirmed nor denied (errors, timeouts) are
// [ErrOutcomeUnknown] with their *NodeErrors, and the hold goes on until
// its Until, which the calls sent may have shortened: only a quorum of
// refusals, or no validity left, is [ErrLockLost].
func (l *Lock) extend(ctx context.Context, ttl time.Duration) (rerr error) {
	c := l.a.c
	trace := c.startOp(ctx, OpExtend, l.a.key(), l.token)
	if trace != nil {
		defer func() { trace.End(l.token, rerr) }()
	}
	select {
	case l.serial <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-l.serial }()
	l.mu.Lock()
	ended := l.ended
	l.mu.Unlock()
	if ended {
		return ErrLockLost
	}
	select {
	case <-c.life.Done():
		// Close ends every hold (see Close): no new calls, which Close
		// would wait for.
		l.end(true)
		return join(ErrLockLost, errClosed)
	default:
	}
	start := c.cfg.clock.Now()
	until := start.Add(ttl - c.driftOf(ttl))
	script, keys, args := extendScript, l.a.lockKey(), []any{l.a.value, ttl.Milliseconds()}
	if c.cfg.reacquire {
		// A key is re-created only within the validity: past it, another
		// hold may have been granted by the nodes this one would re-create.
		l.mu.Lock()
		over := pastValidity(start, l.until)
		if !over {
			l.reacquiring = true
		}
		l.mu.Unlock()
		if over {
			l.end(true)
			return ErrLockLost
		}
		script, keys = reacquireScript, l.a.keys[:2]
		args = append(args, strconv.FormatUint(l.token, 10))
	}
	// A PEXPIRE may land any time once sent, whatever this call returns: a
	// shorter end counts from now on, and stays unless a quorum confirms.
	l.mu.Lock()
	if next := thirdOf(start, until); l.auto && !l.extending && next.Before(l.extendAt) {
		// The caller's Extend to a shorter TTL: the watchdog's next
		// extension comes a third of its validity from now, not after its end.
		l.extendAt = next
	}
	if until.Before(l.until) {
		l.setUntilLocked(until)
	}
	valid := l.until // the validity the hold has while this extension decides
	l.mu.Unlock()
	l.a.extending(ttl)
	// Lost needs a quorum to say so (more refusals than N − quorum): short
	// of that, the answers still out decide between lost and unknown.
	votes := make(voteSink, len(c.all))
	var sink sink = votes
	if script == reacquireScript {
		sink = reacquireSink{votes, l}
	}
	g := c.newGroup(sink, c.nodeTimeout(ttl), c.all, script, keys, args...)
	g.trace = trace
	g.start()
	yes, refused, errs, ctxErr := c.count(ctx, votes, len(c.all), c.quorum, len(c.all)-c.quorum+1)
	oks := len(yes)
	if ctxErr != nil && oks < c.quorum {
		return join(ErrOutcomeUnknown, ctxErr)
	}
	if oks < c.quorum && refused <= len(c.all)-c.quorum {
		// Not a quorum of refusals: errs is not empty.
		return join(append([]error{ErrOutcomeUnknown}, errs...)...)
	}
	now := c.cfg.clock.Now()
	if oks < c.quorum || !now.Before(until) || script == reacquireScript && pastValidity(now, valid) {
		// With re-creates, an extension that decides after the validity
		// ran out may count keys it put back after another hold came and
		// went: the hold is over, and a re-create does not revive it.
		l.end(true)
		return join(append([]error{ErrLockLost}, errs...)...)
	}
	l.mu.Lock()
	if l.ended {
		l.mu.Unlock()
		return ErrLockLost
	}
	l.setUntilLocked(until)
	l.mu.Unlock()
	c.cfg.observer.Extended(l.a.key(), l.token)
	return nil
}

// pastValidity reports whether now is at or past valid, the end of a
// hold's validity: an extension that may re-create keys neither goes out
// nor counts then (WithReacquireOnExtend).
func pastValidity(now, valid time.Time) bool { return !now.Before(valid) }

// reacquireSink counts reacquire.lua's answers: 1 (extended) and 2
// (re-created) are a yes, and each 2 is noted on the hold, also one that
// comes after the call timed out.
type reacquireSink struct {
	votes voteSink
	l     *Lock
}

func (s reacquireSink) answer(i int, v any, err error) {
	n := asInt(v)
	if n == 2 && (err == nil || errors.Is(err, ErrReplicaAcks)) {
		// Re-created, whether or not enough replicas acknowledged it in
		// time (then it does not count, but the key is there).
		s.l.noteReacquired(i)
	}
	s.votes <- vote{node: i, ok: err == nil && (n == 1 || n == 2), err: err}
}

func (s reacquireSink) late(i int, v any) {
	if asInt(v) != 2 {
		return
	}
	s.l.noteReacquired(i)
	// A re-create that answers after its call timed out, for a hold that
	// ended other than by Unlock, is stepped back: nothing else would
	// remove it before its TTL. An Unlock's release follows it on the
	// node's queue.
	s.l.mu.Lock()
	over := s.l.ended && !s.l.unlocked
	s.l.mu.Unlock()
	if over {
		s.l.a.stepBack(i)
	}
}

// noteReacquired records that node i re-created the hold's key.
func (l *Lock) noteReacquired(i int) {
	l.mu.Lock()
	l.reacquired = append(l.reacquired, i)
	l.mu.Unlock()
	c := l.a.c
	c.cfg.logger.Info("redlock: key re-created on a node that had lost it", "key", l.a.key(), "token", l.token, "node", i)
	if c.cfg.hooks.reacquire {
		c.cfg.observer.(safeObserver).Reacquired(l.a.key(), l.token, i)
	}
}

// setUntilLocked moves the end of validity; l.mu is held. A Client closed
// meanwhile ended the hold already (Close ends every scheduled one), so
// scheduleLocked's report is not needed here.
func (l *Lock) setUntilLocked(until time.Time) {
	l.until = until
	_ = l.scheduleLocked()
}

// Unlock releases the hold: compare-and-delete on every node that granted
// it, never a bare DEL, so it cannot remove another holder's key. It returns
// once a quorum released (nil) or that became impossible: [ErrLockLost] when
// fewer than a quorum still held it; [ErrOutcomeUnknown] joined with the
// nodes' errors (*NodeError) when nodes failed that may have held it, or
// with ctx.Err() when ctx ended before enough nodes answered. The other
// releases finish in the background, and a node that failed is sent its
// release again until it lands or the key has expired. The releases go out
// even when ctx is already cancelled, after any Extend of this handle still
// deciding. Done closes. A second Unlock returns [ErrLockLost]. Each node
// that releases the key announces it to the first waiter in its waiting
// set (see [Client.Lock]).
func (l *Lock) Unlock(ctx context.Context) (rerr error) {
	c := l.a.c
	trace := c.startOp(ctx, OpUnlock, l.a.key(), l.token)
	if trace != nil {
		defer func() { trace.End(l.token, rerr) }()
	}
	l.mu.Lock()
	if l.unlocked {
		l.mu.Unlock()
		return ErrLockLost
	}
	l.unlocked = true
	l.mu.Unlock()
	l.end(false)
	l.serial <- struct{}{} // an Extend in progress decides within its node timeout
	defer func() { <-l.serial }()

	// Every node that may hold it: those that granted or failed, and those
	// that have not answered the acquire yet. A key's calls reach a node in
	// order, so a release cannot overtake the acquire before it.
	// After an Extend that may have re-created the key, every node may
	// hold it: none is left out.
	l.mu.Lock()
	every := l.reacquiring
	l.mu.Unlock()
	nodes := c.all
	if refused := l.a.refusedBy(l.token, every); len(refused) > 0 {
		nodes = slices.DeleteFunc(slices.Clone(c.all), func(i int) bool { return slices.Contains(refused, i) })
	}
	// A node that fails is owed its release (see owe): sent again until
	// it lands, or the hold's longest TTL has certainly passed.
	votes := make(voteSink, len(nodes))
	keys, args := l.a.releaseKeys(), l.a.releaseArgs(true)
	sink := owing{votes: votes, c: c, keys: keys, args: args, ttl: l.a.longestTTL(), tmo: l.a.timeout()}
	g := c.newGroup(sink, l.a.timeout(), nodes, releaseScript, keys, args...)
	g.trace = trace
	g.start()
	yes, refused, errs, ctxErr := c.count(ctx, votes, len(nodes), c.quorum, 0)
	oks := len(yes)
	switch {
	case oks >= c.quorum:
		c.cfg.observer.Released(l.a.key(), l.token)
		return nil
	case ctxErr != nil:
		return join(ErrOutcomeUnknown, ctxErr)
	case len(nodes)-refused >= c.quorum && len(errs) > 0:
		// Nodes that failed may still have held it: not known to be lost,
		// not known to be released (their releases are retried, see owe;
		// it expires at its TTL in any case).
		return join(append([]error{ErrOutcomeUnknown}, errs...)...)
	}
	l.mu.Lock()
	l.lost = true // gone before this Unlock: a loss after all (see Client.Do)
	l.mu.Unlock()
	c.cfg.observer.Lost(l.a.key(), l.token)
	return join(append([]error{ErrLockLost}, errs...)...)
}
