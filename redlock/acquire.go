package redlock

import (
	"context"
	"errors"
	"time"
)

// TryLock makes one attempt to acquire key on a quorum of nodes for ttl. It
// returns ErrNotAcquired when another holder has the key, joined with the
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

// tryOnce is one attempt. On failure it also returns how long the current
// holder's key has left (0 when unknown), the longest a waiter should sleep.
//
// It decides as soon as the answers allow: a quorum of grants, or answers
// that cannot make one as they stand. Then a split vote between contenders
// is resolved in the same attempt (tally.wins): the winner asks the
// contenders' nodes again, up to maxReasks times, about a round trip apart;
// the others fail at once. Nodes that have not answered when someone else
// already refused get a short grace, not the whole node timeout: holding
// partial grants that long makes every contender fail.
func (c *Client) tryOnce(ctx context.Context, key string, ttl time.Duration, lc lockConfig) (*Lock, time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, errors.Join(ErrNotAcquired, err)
	}
	select {
	case <-c.closing:
		return nil, 0, errors.Join(ErrNotAcquired, errClosed)
	default:
	}
	wall := time.Now() // network waits are real time
	a := c.startAttempt(key, ttl, lc.since)
	t := newTally(len(c.nodes), c.quorum)
	var (
		grace    <-chan time.Time // runs from the first refusal
		graced   bool             // it ran out: nodes still silent are not waited for
		reask    *time.Timer      // set while a split vote's winner waits to ask again
		reasks   int
		reasked  []int     // the nodes asked again last
		lastAsk  = wall    // when the latest ask went out
		reaskEnd time.Time // no new ask after this
	)
	defer func() {
		if reask != nil {
			reask.Stop()
		}
	}()
	for {
		n := t.counts()
		if n.granted >= c.quorum {
			break
		}
		if n.refused > 0 && grace == nil {
			g := time.NewTimer(max(a.timeout/4, 3*time.Since(wall)))
			defer g.Stop()
			grace = g.C
		}
		stuck := n.waiting == 0 || n.granted+n.waiting < c.quorum || (graced && !t.anyWaiting(reasked))
		if stuck && reask == nil {
			if reaskEnd.IsZero() {
				reaskEnd = time.Now().Add(a.timeout)
			}
			if reasks == maxReasks || !t.wins(a.value) || time.Now().After(reaskEnd) ||
				!c.cfg.clock.Now().Before(a.start.Add(ttl-c.driftOf(ttl))) {
				return nil, t.holderTTL(), a.fail(errors.Join(append([]error{ErrNotAcquired}, t.errs()...)...))
			}
			// The contenders step back now; ask again once their releases
			// had about a round trip to land.
			reask = time.NewTimer(time.Since(lastAsk))
		}
		var reaskC <-chan time.Time
		if reask != nil {
			reaskC = reask.C
		}
		select {
		case r := <-a.replies:
			t.add(r)
		case <-grace:
			graced, grace = true, make(chan time.Time) // never again
		case <-reaskC:
			reask, reasks = nil, reasks+1
			reasked, lastAsk = t.refusers(), time.Now()
			t.asked(reasked)
			a.ask(reasked)
		case <-ctx.Done():
			return nil, 0, a.fail(errors.Join(ErrNotAcquired, ctx.Err()))
		}
	}
	token, ok := a.fence(t.grants())
	if !ok {
		return nil, t.holderTTL(), a.fail(errors.Join(ErrNotAcquired, errNoFenceQuorum))
	}
	until := a.start.Add(ttl - c.driftOf(ttl))
	now := c.cfg.clock.Now()
	if !now.Before(until) {
		return nil, t.holderTTL(), a.fail(errors.Join(ErrNotAcquired, errNoValidity))
	}
	l := newLock(a, token, until)
	for _, r := range a.decide(acquired, token) {
		a.settle(r, acquired, token)
	}
	c.cfg.observer.Acquired(key, token, now.Sub(a.start))
	if lc.autoExtend {
		l.startWatchdog()
	}
	return l, 0, nil
}
