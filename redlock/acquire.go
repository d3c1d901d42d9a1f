package redlock

import (
	"context"
	"errors"
	"math/rand/v2"
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
	l, _, err := c.tryOnce(ctx, key, ttl, lc)
	return l, err
}

// Lock acquires key, retrying until it succeeds, the retry strategy gives up
// ([ErrNotAcquired]) or ctx ends (errors.Join([ErrNotAcquired], ctx.Err())). A
// strategy that allows no retry ([NoRetry], LimitRetry(s, 0)) makes it one
// attempt, exactly like TryLock.
//
// Waiting is not polling: a waiter sleeps at most the backoff and never past
// the holder's remaining TTL, and a release wakes it at once — through Redis
// pub/sub from other processes, directly from this one. Waiters for one key
// in one process queue up, first come first served, so that only the head
// retries on the wire; a newcomer tries once first only when nobody in its
// process waits. Releases announced by a quorum of nodes wake the head.
func (c *Client) Lock(ctx context.Context, key string, ttl time.Duration, opts ...LockOption) (*Lock, error) {
	lc, err := c.lockConfig(key, ttl, opts)
	if err != nil {
		return nil, err
	}
	if _, ok := lc.retry.Backoff(1); !ok {
		l, _, err := c.tryOnce(ctx, key, ttl, lc)
		return l, withCtx(ctx, err)
	}
	var (
		l        *Lock
		hint     time.Duration
		tried    bool
		granted  int           // nodes that granted the last attempt
		took     time.Duration // the last attempt's time on the wire
		courtesy = c.waiters.courtesy(key)
	)
	switch {
	case c.waiters.waiting(key):
		// Local waiters are ahead: no barging, or the newcomer and the head
		// woken by the last release split the nodes' votes.
		err = ErrNotAcquired
	case courtesy > 0:
		// Other processes wait for this key too: no barging past their
		// heads either; try after they had their chance.
		err = ErrNotAcquired
	default:
		c.waiters.prepare(key)
		start := time.Now()
		var f failure
		l, f, err = c.tryOnce(ctx, key, ttl, lc)
		hint, granted = f.holderTTL, f.granted
		if err == nil || !retryable(ctx, err) {
			return l, withCtx(ctx, err)
		}
		tried, took = true, time.Since(start)
	}
	q, w := c.waiters.join(key)
	defer func() { c.waiters.leave(key, q, w, l != nil) }()
	if tried {
		c.waiters.tried(q, took, hint > 0, granted)
	}
	select {
	case <-w:
	case <-ctx.Done():
		return nil, errors.Join(ErrNotAcquired, ctx.Err())
	case <-c.closing:
		return nil, errors.Join(ErrNotAcquired, errClosed)
	}
	// At the head: be subscribed before the next attempt, so that a release
	// that follows a refusal cannot go unheard. A release may have passed
	// before that, or before this waiter became the head: look at once,
	// unless the head before it left holding the lock (its Unlock wakes this
	// one) or other processes are to go first.
	fresh := c.waiters.ready(ctx, q, c.nodeTimeout(ttl))
	now := fresh || (!tried && courtesy == 0 && !c.waiters.holding(q))
	for retries := 0; ; {
		var d time.Duration
		switch {
		case tried:
			retries++
			var ok bool
			if d, ok = lc.retry.Backoff(retries); !ok {
				return nil, err
			}
		case courtesy > 0:
			d = courtesy
		default:
			d, _ = lc.retry.Backoff(1) // the first attempt is no retry
		}
		if !now {
			if hint > 0 {
				// Refused by another value: a holder, or the winner of a
				// split vote, which needs about as long as this attempt
				// took to ask the others' nodes again. Retrying sooner
				// takes those nodes from under it, and nobody gets the key.
				d = max(d, 2*took)
			}
			if hint > 0 && hint < d {
				// Wake when the holder's key expires, spread over a couple
				// of milliseconds: waiters in other processes got the same
				// hint, and arriving together splits the nodes' votes.
				d = hint + rand.N(2*time.Millisecond)
			}
			for {
				c.waiters.present(q, c.nodeTimeout(ttl))
				woken, serr := c.sleep(ctx, q.released, d)
				if serr != nil {
					return nil, serr
				}
				if !woken {
					break
				}
				taken, serr := c.stagger(ctx, q, lc.since)
				if serr != nil {
					return nil, serr
				}
				if !taken {
					break
				}
				// Another process took the key while this head waited
				// its turn: asking now would only be refused. Wait for
				// that hold's release, as before.
				c.waiters.rearm(q)
			}
		}
		now = false
		c.waiters.drain(q)
		start := time.Now()
		var f failure
		l, f, err = c.tryOnce(ctx, key, ttl, lc)
		hint, granted = f.holderTTL, f.granted
		took = time.Since(start)
		c.waiters.tried(q, took, hint > 0, granted)
		tried = true
		if err == nil || !retryable(ctx, err) {
			return l, withCtx(ctx, err)
		}
	}
}

// Do acquires key (waiting like Lock), runs fn while the hold is extended
// automatically, and unlocks when fn returns. fn's ctx is cancelled the
// moment the lock is lost — fn must stop writing then — and Do returns fn's
// error joined with [ErrLockLost] in that case. Use l.Token() to fence fn's
// writes. If fn panics, Do stops the watchdog and unlocks, and the panic
// goes on with its own value. fn may call l.Unlock itself, to release early:
// that is no loss, and Do returns fn's error alone.
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
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := make(chan struct{})
	watched := make(chan bool, 1) // whether the lock was lost while fn ran
	go func() {
		select {
		case <-l.Done():
			lost := l.endedLost() // not when fn called Unlock itself
			if lost {
				cancel()
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
			return lost, nil
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
		return errors.Join(ferr, ErrLockLost)
	}
	return errors.Join(ferr, uerr)
}

func (c *Client) lockConfig(key string, ttl time.Duration, opts []LockOption) (lockConfig, error) {
	lc := lockConfig{retry: c.cfg.retry, since: time.Now()}
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
	return errors.Join(err, ctx.Err())
}

// sleep waits d on the client's clock, or until a release is announced.
func (c *Client) sleep(ctx context.Context, released <-chan struct{}, d time.Duration) (woken bool, err error) {
	if d <= 0 {
		return false, nil
	}
	t := c.cfg.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return false, nil
	case <-released:
		return true, nil
	case <-ctx.Done():
		return false, errors.Join(ErrNotAcquired, ctx.Err())
	case <-c.closing:
		return false, errors.Join(ErrNotAcquired, errClosed)
	}
}

// stagger holds a head that a release woke for its random part of the
// spread (see waitQueues.spread) and reports whether another process took
// the key meanwhile, by a quorum of announced grants.
func (c *Client) stagger(ctx context.Context, q *keyQueue, since time.Time) (taken bool, err error) {
	d := c.waiters.spread(q, since)
	if d <= 0 {
		return false, nil
	}
	t := time.NewTimer(d) // network waits are real time
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return c.waiters.taken(q), nil
		case <-q.granted:
			if c.waiters.taken(q) {
				return true, nil
			}
		case <-ctx.Done():
			return false, errors.Join(ErrNotAcquired, ctx.Err())
		case <-c.closing:
			return false, errors.Join(ErrNotAcquired, errClosed)
		}
	}
}
