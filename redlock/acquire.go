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
// ([ErrNotAcquired]) or ctx ends (join([ErrNotAcquired], ctx.Err())). A
// strategy that allows no retry ([NoRetry], LimitRetry(s, 0)) makes it one
// attempt, exactly like TryLock.
//
// Waiting is not polling: a waiter sleeps at most the backoff and never past
// the holder's remaining TTL, and a release wakes it at once — through Redis
// pub/sub from other processes, directly from this one. Waiters for one key
// in one process queue up, first come first served, so that only the head
// retries on the wire; a newcomer tries once first only when nobody in its
// process waits. Releases announced by a quorum of nodes wake the head.
//
// Processes take turns: a release names the next waiting process, whose
// head asks at once while the others wait for its grants. A holder whose
// own process has a waiter for the key hands the key to it in one round
// trip (the release and that waiter's acquire in one script per node), at
// most three times in a row while other processes wait. When the backoff
// runs out and, by the nodes' announcements, another process holds the key
// or its turn was named, the head counts that as a refused retry without
// asking. Announcements are hints: a lost or forged one delays a waiter by
// at most its backoff, one yield (about 32 round trips), the holder's TTL
// or its own, and never decides who holds the key.
func (c *Client) Lock(ctx context.Context, key string, ttl time.Duration, opts ...LockOption) (_ *Lock, rerr error) {
	lc, err := c.lockConfig(key, ttl, opts)
	if err != nil {
		return nil, err
	}
	var last []error // the node errors of the last attempt that had any
	defer func() {
		// A wait that ctx ended says why the attempts before it failed:
		// which nodes are down, say.
		if rerr != nil && ctx.Err() != nil && len(nodeErrors(rerr)) == 0 && len(last) > 0 {
			rerr = join(append([]error{rerr}, last...)...)
		}
	}()
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
		last = lastNodeErrors(last, err)
		hint, granted = f.holderTTL, f.granted
		if err == nil || !retryable(ctx, err) {
			return l, withCtx(ctx, err)
		}
		tried, took = true, time.Since(start)
	}
	q, w := c.waiters.join(key)
	defer func() {
		var until time.Time
		if l != nil {
			until = l.Until()
		}
		c.waiters.leave(key, q, w, until)
	}()
	var (
		offer *handoff // this head's offer to be handed the key (see handoff); nil once its result is taken
	)
	defer func() { // before leave: the next head must not see the offer
		if offer == nil {
			return
		}
		c.waiters.withdraw(context.WithoutCancel(ctx), q, offer)
	}()
	if tried {
		c.waiters.tried(q, took, hint > 0, granted)
	}
	// Behind the head, the call's own strategy still bounds its wait: each
	// try it has is made when due (only the head is woken by releases),
	// and it gives up when the strategy does.
	retries := 0
	for queued := true; queued; {
		select {
		case <-w: // at the head already: no timer of its own
			queued = false
			continue
		default:
		}
		var d time.Duration
		if tried {
			var ok bool
			if d, ok = lc.retry.Backoff(retries + 1); !ok {
				return nil, err
			}
		} else {
			d, _ = lc.retry.Backoff(1) // the first attempt is no retry
		}
		due := c.cfg.clock.NewTimer(retryWait(d, hint, took))
		select {
		case <-w:
			queued = false
		case <-due.C():
			if tried {
				retries++
			}
			var f failure
			start := time.Now()
			l, f, err = c.tryOnce(ctx, key, ttl, lc)
			last = lastNodeErrors(last, err)
			hint, tried, took = f.holderTTL, true, time.Since(start)
			if err == nil || !retryable(ctx, err) {
				due.Stop()
				return l, withCtx(ctx, err)
			}
		case <-ctx.Done():
			due.Stop()
			return nil, join(ErrNotAcquired, ctx.Err())
		case <-c.closing:
			due.Stop()
			return nil, join(ErrNotAcquired, errClosed)
		}
		due.Stop()
	}
	// At the head: be subscribed before the next attempt, so that a release
	// that follows a refusal cannot go unheard. A release may have passed
	// before that, or before this waiter became the head: look at once,
	// unless the head before it left holding the lock (its Unlock wakes this
	// one) or other processes are to go first.
	fresh := c.waiters.ready(ctx, q, c.nodeTimeout(ttl))
	now := fresh || (!tried && courtesy == 0 && !c.waiters.holding(q))
	for {
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
		skip := false // the backoff ran out on a key another process holds
		if !now {
			d = retryWait(d, hint, took)
			offer = c.waiters.offer(q, ttl, lc)
			for {
				c.waiters.present(q, c.nodeTimeout(ttl))
				left, woken, serr := c.sleep(ctx, q.released, offer.ready, d)
				if errors.Is(serr, errHanded) {
					break
				}
				if serr != nil {
					return nil, serr
				}
				if !woken {
					// The backoff ran out. By the nodes' announcements,
					// another process may hold the key (an ask would be
					// refused: count it as one, and sleep the next
					// backoff); so may this one, or it just released it
					// (see ownBusy). Else it goes on as if woken: a release
					// may have named another Client's turn (an ask would
					// split the votes with it: yield to it), or may be
					// on its way, with others' heads woken by it (spread).
					if c.heldElsewhere(ctx, q, key, ttl) || c.waiters.ownBusy(q) {
						skip = true
						break
					}
					if _, mine := c.waiters.named(q); mine {
						break
					}
					left = c.yield()
				}
				passed, serr := c.stagger(ctx, q, offer.ready, lc.since, ttl, left)
				if errors.Is(serr, errHanded) {
					break
				}
				if serr != nil {
					return nil, serr
				}
				if !passed {
					break
				}
				// Another process took the key while this head waited
				// its turn: asking now would only be refused. Wait for
				// that hold's release, as before.
			}
		}
		if offer != nil && c.waiters.unoffer(q, offer) {
			// This process's holder claimed the offer and makes the
			// attempt for this head: wait for it instead of asking too.
			select {
			case <-offer.ready:
			case <-ctx.Done():
				return nil, join(ErrNotAcquired, ctx.Err())
			case <-c.closing:
				return nil, join(ErrNotAcquired, errClosed)
			}
			r := c.waiters.take(offer)
			offer = nil
			l, err = r.l, r.err
			last = lastNodeErrors(last, err)
			hint, granted = r.f.holderTTL, r.f.granted
			c.waiters.tried(q, took, hint > 0, granted)
			tried = true
			if err == nil || !retryable(ctx, err) {
				return l, withCtx(ctx, err)
			}
			continue
		}
		offer = nil
		if skip {
			hint, tried = 0, true
			continue
		}
		now = false
		c.waiters.drain(q)
		start := time.Now()
		var f failure
		l, f, err = c.tryOnce(ctx, key, ttl, lc)
		last = lastNodeErrors(last, err)
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
// moment the lock is lost (see [AutoExtend] for when the watchdog gives a
// hold up) — fn must stop writing then — and Do returns fn's
// error joined with [ErrLockLost] in that case. Use l.Token() to fence fn's
// writes. If fn panics, Do stops the watchdog and unlocks, and the panic
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
	errHanded        = errors.New("redlock: handed the key") // a head's offer was taken up (never returned)
	errNoValidity    = errors.New("redlock: quorum reached after the validity ran out")
	errNoFenceQuorum = errors.New("redlock: fence counters could not be raised on a quorum")
)

// retryWait is how long a waiter sleeps before its next try: the backoff
// d, but after a refusal by another value (hint, the holder's key's time
// left) at least twice as long as the last attempt took — a holder, or the
// winner of a split vote, which needs about that long to ask the others'
// nodes again: retrying sooner takes those nodes from under it, and nobody
// gets the key — and no later than the holder's key expires, spread over a
// couple of milliseconds (waiters in other processes got the same hint,
// and arriving together splits the nodes' votes).
func retryWait(d, hint, took time.Duration) time.Duration {
	if hint <= 0 {
		return d
	}
	d = max(d, mulSat(took, 2))
	if hint < d {
		d = addSat(hint, rand.N(2*time.Millisecond))
	}
	return d
}

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

// heldElsewhere is letPass for a head whose backoff ran out, checked with
// one node first: the announcements say another process holds key, and
// that node still has the key. A release can go unheard (pub/sub delivers
// at most once, and a subscription that reconnects misses what came
// meanwhile): trusted alone, the announced grant would hold the head until
// its TTL, on a free key. One read of one node, not an ask of every node.
func (c *Client) heldElsewhere(ctx context.Context, q *keyQueue, key string, ttl time.Duration) bool {
	node, value, ok := c.waiters.takenOn(q, ttl)
	if !ok {
		return false
	}
	if !c.exists(ctx, node, key, c.nodeTimeout(ttl)) {
		// That hold is over, whatever was (not) heard: forgotten, it
		// cannot make the head let it pass later either (see stagger).
		c.waiters.forgetHeld(q, value)
		return false
	}
	return c.waiters.letPass(q, ttl)
}

// exists reports whether node i has key, within timeout; false on any
// error, on a timeout, and on a panic of the node's client (logged, as in
// goNode). go-redis honours the deadline only with ContextTimeoutEnabled:
// the call runs on a goroutine of its own, which a frozen node may keep
// until go-redis's ReadTimeout, but the caller returns at the deadline.
func (c *Client) exists(ctx context.Context, i int, key string, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res := make(chan bool, 1)
	go func() {
		ok := false
		defer func() { res <- ok }()
		defer c.recoverNode(i)
		n, err := c.nodes[i].rdb.Exists(ctx, key).Result()
		ok = err == nil && n > 0
	}()
	select {
	case ok := <-res:
		return ok
	case <-ctx.Done():
		return false
	}
}

// sleep waits d on the client's clock, or until a release is announced
// (woken, it reports what was left of d), or until handed is closed (this
// head was handed the key or its attempt's failure: errHanded).
func (c *Client) sleep(ctx context.Context, released, handed <-chan struct{}, d time.Duration) (left time.Duration, woken bool, err error) {
	if d <= 0 {
		return 0, false, nil
	}
	start := c.cfg.clock.Now()
	t := c.cfg.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return 0, false, nil
	case <-released:
		// A clock set back meanwhile took no time from the sleep.
		return d - max(c.cfg.clock.Since(start), 0), true, nil
	case <-handed:
		return 0, false, errHanded
	case <-ctx.Done():
		return 0, false, join(ErrNotAcquired, ctx.Err())
	case <-c.closing:
		return 0, false, join(ErrNotAcquired, errClosed)
	}
}

// stagger holds a head that a release woke until it is its turn to ask.
// When the release named the Client whose turn it is (see
// waitQueues.successorLocked), the head of that Client asks at once and
// the others yield: they wait for its grants, at most yieldRTTs round trips
// to a quorum. Else, or when the named Client did not take the key in that
// time, the head waits its random part of the spread (see
// waitQueues.spread). A release heard meanwhile may name another Client,
// or this one: the head looks again at each. All of it lasts at most left
// — what was left of its sleep, 0 or less for a head woken just as it ran
// out —, or one yield from the first name, if that is longer: a release
// names whose turn it is however late in a head's sleep it comes
// (measured with 8 processes: one cross-process hold in seven went out of
// turn when a head that had no sleep left asked at once). The messages
// behind the waits (who is named, how many processes contend) may be
// forged, and must not hold a head much past its backoff: at most one
// yield per wake-up, and a wake-up takes a quorum's announcements. It
// reports whether another process took the key
// meanwhile, by a quorum of announced grants: then the head lets that hold
// pass, rearmed for its release (waitQueues.letPass).
func (c *Client) stagger(ctx context.Context, q *keyQueue, handed <-chan struct{}, since time.Time, ttl, left time.Duration) (passed bool, err error) {
	left = max(left, 0)
	yield := c.yield()
	var (
		end              = time.Now().Add(left) // network waits are real time
		yieldTo          string                 // the Client yielded to
		yieldEnd         time.Time
		spreading        bool
		spreadEnd, until time.Time
		t                = time.NewTimer(left)
	)
	defer t.Stop()
	for {
		next, mine := c.waiters.named(q)
		now := time.Now()
		switch {
		case mine:
			return false, nil
		case next == "" && yieldTo == "" && c.waiters.ownBusy(q):
			// This process holds the key, or its release is still to be
			// announced by enough nodes, with the name of whose turn it is.
			yieldTo, yieldEnd, spreading = ownTurn, now.Add(yield), false
			if end.Before(yieldEnd) {
				end = yieldEnd
			}
		case next != "" && next != yieldTo:
			if (yieldTo == "" || yieldTo == ownTurn) && end.Before(now.Add(yield)) {
				// The named Client's turn outlasts this head's backoff:
				// once per wake, not to ask into its attempt.
				end = now.Add(yield)
			}
			yieldTo, yieldEnd, spreading = next, now.Add(yield), false
		}
		if !spreading && (yieldTo == "" || !now.Before(yieldEnd)) {
			spreading, spreadEnd = true, now.Add(c.waiters.spread(q, since))
		}
		until = yieldEnd
		if spreading {
			until = spreadEnd
		}
		if until.After(end) {
			until = end
		}
		if !now.Before(until) {
			if spreading || until == end {
				return c.waiters.letPass(q, ttl), nil
			}
			continue // the yield is over: spread
		}
		t.Reset(until.Sub(now))
		select {
		case <-t.C:
		case <-q.granted:
			if c.waiters.letPass(q, ttl) {
				return true, nil
			}
		case <-q.released: // look again at who is named
		case <-handed:
			return false, errHanded
		case <-ctx.Done():
			return false, join(ErrNotAcquired, ctx.Err())
		case <-c.closing:
			return false, join(ErrNotAcquired, errClosed)
		}
	}
}

// ownTurn stands in stagger for a name still to come with this process's
// own release.
const ownTurn = "\x00own"

// yield is how long a head waits for the named Client (see stagger).
func (c *Client) yield() time.Duration {
	return max(yieldRTTs*time.Duration(c.rtt.Load()), yieldAtLeast)
}

// yieldRTTs is how many round trips to a quorum a head waits for the
// grants of the Client a release named, before it asks itself, and at
// least yieldAtLeast: the named Client hears of the release when the
// others do, and takes the key in about one round trip — several on a
// loaded machine, whose scheduler holds the named head back now and then
// (measured under -race: with 16 round trips and 2ms, the releaser's own
// head took the key back after one yield in ten). The yield runs out only
// when the named Client no longer waits: it is named until its last
// presence is sharedFor old (see successorLocked).
const (
	yieldRTTs    = 32
	yieldAtLeast = 5 * time.Millisecond
)
