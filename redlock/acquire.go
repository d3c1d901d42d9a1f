package redlock

import (
	"context"
	"errors"
	"sync"
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
	lc := lockConfig{retry: c.cfg.retry}
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

// tryOnce is one attempt. On failure it also returns how long the current
// holder's key has left (0 when unknown), the longest a waiter should sleep.
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
	a := c.startAttempt(key, ttl)
	n, q := len(c.nodes), c.quorum
	var (
		grants    = make([]reply, 0, n)
		refused   int
		hint      time.Duration
		errs      []error
		contended <-chan time.Time
	)
	for len(grants) < q && refused+len(errs) <= n-q {
		if refused > 0 && contended == nil {
			// Someone else holds the key on a node and the outcome waits on
			// nodes that have not answered. Healthy nodes answer within a
			// few round trips; a frozen one only at the node timeout, and
			// holding partial grants that long makes every contender fail
			// (a convoy). So give the rest a short grace, then step back.
			t := time.NewTimer(max(a.timeout/4, 3*time.Since(wall)))
			defer t.Stop()
			contended = t.C
		}
		select {
		case <-contended:
			return nil, hint, a.fail(ErrNotAcquired)
		case r := <-a.replies:
			switch {
			case r.err != nil:
				errs = append(errs, r.err)
			case r.granted:
				grants = append(grants, r)
			default:
				refused++
				if r.pttl > 0 && (hint == 0 || r.pttl < hint) {
					hint = r.pttl
				}
			}
		case <-ctx.Done():
			return nil, 0, a.fail(errors.Join(ErrNotAcquired, ctx.Err()))
		}
	}
	if len(grants) < q {
		if len(errs) > 0 {
			return nil, hint, a.fail(errors.Join(append([]error{ErrNotAcquired}, errs...)...))
		}
		return nil, hint, a.fail(ErrNotAcquired)
	}
	token, ok := a.fence(grants)
	if !ok {
		return nil, hint, a.fail(errors.Join(ErrNotAcquired, errNoFenceQuorum))
	}
	until := a.start.Add(ttl - c.driftOf(ttl))
	now := c.cfg.clock.Now()
	if !now.Before(until) {
		return nil, hint, a.fail(errors.Join(ErrNotAcquired, errNoValidity))
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

var (
	errClosed        = errors.New("redlock: client closed")
	errNoValidity    = errors.New("redlock: quorum reached after the validity ran out")
	errNoFenceQuorum = errors.New("redlock: fence counters could not be raised on a quorum")
)

// fence computes the token from the grants (see DESIGN: fencing tokens).
// Fast path: a quorum of grants already agree on the highest counter t.
// Otherwise the lagging grants are raised to t, each only while this hold
// still owns the key there; the token is t if that makes a quorum.
func (a *attempt) fence(grants []reply) (uint64, bool) {
	var t uint64
	for _, g := range grants {
		t = max(t, g.counter)
	}
	var at int
	var lagging []int
	for _, g := range grants {
		if g.counter == t {
			at++
		} else {
			lagging = append(lagging, g.node)
		}
	}
	if at >= a.c.quorum {
		return t, true
	}
	raised, _, _, _ := a.c.fanout(context.Background(), lagging, a.c.quorum-at, a.timeout,
		raiseScript, a.keys, a.value, t)
	return t, at+raised >= a.c.quorum
}

// fail abandons the attempt: it releases every grant already in (those nodes
// answered, so they are up), waits for the missing answers at most the node
// timeout (late grants then release themselves), and returns err.
func (a *attempt) fail(err error) error {
	var wg sync.WaitGroup
	for _, r := range a.decide(abandoned, 0) {
		if r.granted || r.err != nil {
			wg.Go(func() { _, _ = a.release(r.node) })
		}
	}
	wg.Wait()
	t := time.NewTimer(a.timeout)
	defer t.Stop()
	select {
	case <-a.finished:
	case <-t.C:
	}
	return err
}
