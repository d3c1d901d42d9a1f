package redlock

import (
	"context"
	"errors"
	"strings"
	"time"
)

// TryLock makes one attempt to acquire key on a quorum of nodes for ttl. It
// returns [ErrNotAcquired] when another holder has the key, joined with the
// nodes' errors when nodes failed rather than refused, or with ctx.Err()
// when ctx ended. A failed attempt leaves no grant behind.
func (c *Client) TryLock(ctx context.Context, key string, ttl time.Duration, opts ...LockOption) (*Lock, error) {
	lc, err := c.lockConfig(key, ttl, opts)
	if err != nil {
		return nil, err
	}
	lc.trace = c.startOp(ctx, OpAcquire, key, 0)
	l, _, err := c.tryOnce(ctx, key, ttl, lc)
	c.acquireEnded(key, lc, l, err)
	return l, err
}

// Lock acquires key, retrying until it succeeds, the retry strategy gives up
// ([ErrNotAcquired]) or ctx ends (join([ErrNotAcquired], ctx.Err())). A
// strategy that allows no retry ([NoRetry], LimitRetry(s, 0)) makes it one
// attempt, exactly like TryLock.
//
// Waiters are served in the order they began to wait, by one rule kept on
// the nodes (docs/protocol.md, Claim 6): each node keeps the key's waiting
// set, ordered by wait start and Client, and grants the key only to a
// caller that no other waiter there is older than. A refused attempt enters
// or refreshes the caller's place, with a lease (on the node's clock) that
// covers the sleep it plans before its next attempt and a node timeout: a
// waiter that dies or gives up loses its place by its own schedule (one
// that gives up withdraws at once). A release announces itself to the
// first waiter, which wakes once a quorum of nodes announced a release that
// frees the key for it, or refused its try with the key free and it first;
// it sleeps at most its backoff, and never past the
// holder's TTL. Waiters for one key in one Client queue up first come first
// served, and only the head of that queue is on the wire: the others count
// each backoff of theirs as a refused try, and give up when their strategy
// does. A [Client.TryLock] never waits, so it is refused while anyone does.
func (c *Client) Lock(ctx context.Context, key string, ttl time.Duration, opts ...LockOption) (*Lock, error) {
	lc, err := c.lockConfig(key, ttl, opts)
	if err != nil {
		return nil, err
	}
	lc.trace = c.startOp(ctx, OpAcquire, key, 0)
	l, err := c.lock(ctx, key, ttl, lc)
	c.acquireEnded(key, lc, l, err)
	return l, err
}

// acquireEnded reports an acquisition call's outcome to the optional
// observers (observe.go).
func (c *Client) acquireEnded(key string, lc lockConfig, l *Lock, err error) {
	var token uint64
	if l != nil {
		token = l.token
	}
	endOp(lc.trace, token, err)
	c.acquireReturned(key, token, err, lc.since)
}

// lock is Lock once its arguments are checked.
func (c *Client) lock(ctx context.Context, key string, ttl time.Duration, lc lockConfig) (_ *Lock, rerr error) {
	var err error
	if _, ok := lc.retry.Backoff(1); !ok {
		l, _, err := c.tryOnce(ctx, key, ttl, lc)
		return l, withCtx(ctx, err)
	}
	var (
		l    *Lock
		last []error // the node errors of the last attempt that had any
		w    = c.waiters.join(key, lc.since, c.nodeTimeout(ttl))
	)
	defer func() {
		c.waiters.leave(w, l != nil)
		// A wait that ctx ended says why the attempts before it failed:
		// which nodes are down, say.
		if rerr != nil && ctx.Err() != nil && len(nodeErrors(rerr)) == 0 && len(last) > 0 {
			rerr = join(append([]error{rerr}, last...)...)
		}
	}()
	err = ErrNotAcquired
	for retry := 1; ; retry++ {
		// The sleep after this try, chosen before it: a refusal keeps the
		// waiter's place that long, and its drift and a node timeout more,
		// for the next try to arrive.
		d, more := lc.retry.Backoff(retry)
		if w.atHead() {
			// A head asks, unless the hold before it left it its place
			// (then it waits to be woken), but for its last try.
			if !more || c.waiters.asks(w) {
				// A waiter's last try is a waiter's too (a TryLock is not):
				// its place, leased for no sleep, goes when it leaves.
				sleep := d
				if !more {
					sleep = 0
				}
				c.waiters.rearm(w)
				var f failure
				l, f, err = c.try(ctx, key, ttl, lc, addSat(sleep, c.driftOf(sleep)), c.nodeTimeout(ttl))
				last = lastNodeErrors(last, err)
				if err == nil || !retryable(ctx, err) {
					return l, withCtx(ctx, err)
				}
				if f.holderTTL > 0 {
					d = min(d, f.holderTTL)
				}
				if f.refused < c.quorum {
					// Its place is on too few nodes for their releases
					// to wake it (node errors, a split vote): no longer
					// than a call's bound, then it asks again.
					d = min(d, c.nodeTimeout(ttl))
				}
			}
			if c.waiters.ready(ctx, w, c.nodeTimeout(ttl)) {
				// Subscribed just now: a release before that went
				// unheard. Look again, as the same try.
				retry--
				continue
			}
		}
		if !more {
			return nil, err
		}
		if err := c.waiters.sleep(ctx, w, d); err != nil {
			return nil, err
		}
	}
}

// Do acquires key (waiting like Lock), runs fn while the hold is extended
// automatically, and unlocks when fn returns. fn's ctx is cancelled the
// moment the lock is lost (see [AutoExtend] for when the watchdog gives a
// hold up) — fn must stop writing then — and Do returns fn's
// error joined with [ErrLockLost] in that case. Use l.Token() to fence fn's
// writes; [LockFromContext] finds l in fn's ctx, and [Lock.Lease] gives a
// call made under it a deadline. If fn panics, Do stops the watchdog and unlocks, and the panic
// goes on with its own value. fn may call l.Unlock itself, to release early:
// that is no loss, and Do returns fn's error alone — unless that Unlock
// found the hold already gone ([ErrLockLost]), a loss like any other.
func (c *Client) Do(ctx context.Context, key string, ttl time.Duration, fn func(ctx context.Context, l *Lock) error, opts ...LockOption) error {
	if fn == nil {
		return invalid("nil fn")
	}
	if err := checkLockOptions(opts); err != nil {
		return err
	}
	l, err := c.Lock(ctx, key, ttl, append(opts, AutoExtend())...)
	if err != nil {
		return err
	}
	// fn's ctx ends with the cause ErrLockLost when the hold is lost, as the
	// leases fn derives from it do (Lease): a plain cancel here would give
	// them context.Canceled before the hold's end reached them.
	fctx, cancel := context.WithCancelCause(context.WithValue(ctx, lockKey{}, l))
	defer cancel(nil)
	stop := make(chan struct{})
	watched := make(chan bool, 1) // whether the lock was lost while fn ran
	go func() {
		select {
		case <-l.Done():
			lost := l.endedLost() // not when fn called Unlock itself
			if lost {
				cancel(ErrLockLost)
			}
			watched <- lost
		case <-stop:
			watched <- false
		}
	}()
	unlock := func() (lost bool, err error) {
		close(stop)
		lost = <-watched
		if l.unlockCalled() { // by fn: nothing left to release
			return lost || l.endedLost(), nil // its Unlock may have found the hold gone
		}
		return lost, l.Unlock(context.WithoutCancel(ctx)) // also stops the watchdog
	}
	returned := false
	defer func() {
		if !returned { // fn panicked (or called runtime.Goexit): the panic goes on
			_, _ = unlock()
		}
	}()
	ferr := fn(fctx, l)
	returned = true
	lost, uerr := unlock()
	if lost {
		return join(ferr, ErrLockLost)
	}
	return join(ferr, uerr)
}

func (c *Client) lockConfig(key string, ttl time.Duration, opts []LockOption) (lockConfig, error) {
	lc := lockConfig{retry: c.cfg.retry, since: c.cfg.clock.Now()}
	if err := checkLockOptions(opts); err != nil {
		return lc, err
	}
	for _, o := range opts {
		o(&lc)
	}
	if err := c.checkArgs(key, ttl); err != nil {
		return lc, err
	}
	return lc, nil
}

func (c *Client) checkArgs(key string, ttl time.Duration) error {
	switch {
	case key == "":
		return invalid("empty key")
	case FenceKey(key) == key:
		return invalid("key %q is a fence counter", key)
	case strings.HasPrefix(key, "fencedlock:wait:") || strings.HasPrefix(key, "fencedlock:lease:"):
		return invalid("key %q is in the namespace of waiting sets", key)
	case ttl <= 0:
		return invalid("ttl %v is not positive", ttl)
	case ttl < time.Millisecond:
		return invalid("ttl %v is below Redis's 1ms resolution", ttl)
	case ttl-c.driftOf(ttl) <= 0:
		return invalid("ttl %v leaves no validity after the drift allowance %v", ttl, c.driftOf(ttl))
	}
	return nil
}

var (
	errClosed        = errors.New("redlock: client closed")
	errNoValidity    = errors.New("redlock: quorum reached after the validity ran out")
	errNoFenceQuorum = errors.New("redlock: fence counters could not be raised on a quorum")
)

// lastNodeErrors is err's node errors, or last when it has none (an
// attempt that ctx cut short before any node failed).
func lastNodeErrors(last []error, err error) []error {
	if ne := nodeErrors(err); len(ne) > 0 {
		return ne
	}
	return last
}

// retryable says whether a failed attempt is worth another: refusals and
// node errors are; bad input, a closed client, an ended ctx and an exhausted
// fence counter are not (a counter at the maximum means a quorum is there:
// no attempt can succeed again).
func retryable(ctx context.Context, err error) bool {
	return ctx.Err() == nil && errors.Is(err, ErrNotAcquired) && !errors.Is(err, errClosed) &&
		!errors.Is(err, ErrTokenExhausted)
}

// withCtx joins ctx's error to a failure that ctx's end caused.
func withCtx(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil || errors.Is(err, ctx.Err()) {
		return err
	}
	return join(err, ctx.Err())
}
