package chaos

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fencedlock/fencedlock/chaos/locker"
	"github.com/fencedlock/fencedlock/chaos/recorder"
)

// The hunt's holds. Each hold picks a key (the plain one half the time, one
// of the two that share a fence counter otherwise) and a style, from the
// client's seeded source:
//
//   - brief: write, hold a few milliseconds, unlock; now and then a late
//     write follows (see lateWrite);
//   - to validity: write, keep the lock to the end of its validity, unlock
//     after it (a validity computed too long shows as an overlap);
//   - outlive: write, keep it past its validity (without acting), then unlock
//     or extend; before it extends, it waits until the store shows that
//     another hold of the key came (a greater token) and then until the key
//     is free on a quorum of nodes (see awaitFree), so that the extension
//     must fail (a success is the resurrected_hold violation); a successful
//     extension is acted on;
//   - extend: extend twice with Extend, each time late in the validity,
//     writing after each;
//   - auto-extend: Lock with AutoExtend and keep it for several TTLs, across
//     whatever the nodes go through, writing a few times a TTL while Done is
//     open. The extensions the watchdog makes are recorded as the client sees
//     them (Until moved), so the checker's hold never outlasts the client's
//     belief, with the keys they re-created (fencedlock-reacquire).
//
// A hold acts as holder (writes) only while the validity it has seen has at
// least a quarter of the TTL left: the margin keeps a slow machine's
// scheduling from turning a write into an overrun.
type holdStyle int

const (
	brief holdStyle = iota
	toValidity
	outlive
	extend
	autoExtend
)

// huntOnce is one hold of the hunt's workload.
func (c *client) huntOnce(ctx context.Context) {
	tg := huntTargets[0]
	if c.rnd.IntN(2) == 1 {
		tg = huntTargets[1+c.rnd.IntN(len(huntTargets)-1)]
	}
	if c.shape(ctx, tg) { // shapes.go
		return
	}
	style := brief
	switch n := c.rnd.IntN(100); {
	case n < 55:
	case n < 67:
		style = toValidity
	case n < 79:
		style = outlive
	case n < 90:
		style = extend
	default:
		style = autoExtend
	}
	if _, ok := c.lk.(locker.AutoExtender); style == autoExtend && !ok {
		style = extend // the lock cannot keep a hold by itself
	}
	l, h, ok := c.acquire(ctx, tg.key, style == autoExtend)
	if !ok {
		return
	}
	octx := context.WithoutCancel(ctx) // finish the hold when the run ends meanwhile
	ttl := c.cfg.TTL
	c.writeIfValid(octx, l, h, tg.resource)
	switch style {
	case brief:
		sleepReal(ctx, time.Millisecond+time.Duration(c.rnd.Int64N(int64(4*time.Millisecond))))
		ended := time.Now()
		c.unlock(octx, l, h)
		if c.rnd.IntN(4) == 0 {
			c.lateWrite(octx, h, tg.resource, ended)
		}
		return
	case toValidity:
		sleepReal(ctx, l.Until().Sub(c.clk.Now())+ttl/50)
	case outlive:
		sleepReal(ctx, l.Until().Sub(c.clk.Now())+time.Duration(c.rnd.Int64N(int64(ttl/2))))
		if c.rnd.IntN(2) == 1 {
			break
		}
		// The next holder came; extend once it is gone again and the key
		// free on a quorum: a key re-created then is noticed by no one but
		// the checker.
		if c.awaitHigher(ctx, h, tg.resource) {
			c.awaitFree(ctx, tg.key)
		}
		if c.extend(octx, l, h) {
			c.writeIfValid(octx, l, h, tg.resource)
		}
	case extend:
		for range 2 {
			// Late in the validity: from 60% to 90% of what is left.
			left := l.Until().Sub(c.clk.Now())
			if left <= 0 {
				break
			}
			sleepReal(ctx, left*6/10+time.Duration(c.rnd.Int64N(int64(left*3/10)+1)))
			if !c.extend(octx, l, h) {
				break
			}
			c.writeIfValid(octx, l, h, tg.resource)
		}
	case autoExtend:
		c.ride(ctx, octx, l, h, tg.resource)
	}
	c.unlock(octx, l, h)
}

// writeIfValid writes when the validity l has left is at least a quarter of
// the TTL.
func (c *client) writeIfValid(ctx context.Context, l locker.Hold, h recorder.Hold, res string) {
	if l.Until().Sub(c.clk.Now()) >= c.cfg.TTL/4 {
		c.write(ctx, h, res)
	}
}

// extend calls Extend for the TTL and records it; it reports success.
func (c *client) extend(ctx context.Context, l locker.Hold, h recorder.Hold) bool {
	return c.extendFor(ctx, l, h, c.cfg.TTL)
}

// ride keeps an auto-extended hold for two to four TTLs (less when ctx
// ends), writing every third of a TTL while it lasts. Each move of Until is
// recorded as an extension; Done closing, as the lost signal.
func (c *client) ride(ctx, octx context.Context, l locker.Hold, h recorder.Hold, res string) {
	ttl := c.cfg.TTL
	end := time.Now().Add(2*ttl + time.Duration(c.rnd.Int64N(int64(2*ttl))))
	seen := l.Until()
	for time.Now().Before(end) && ctx.Err() == nil {
		sleepReal(ctx, ttl/4)
		select {
		case <-l.Done():
			h.Lost()
			return
		default:
		}
		seen = c.seeExtension(l, h, seen)
		c.writeIfValid(octx, l, h, res)
	}
}

// seeExtension records an extension of the auto-extended hold l if its
// Until moved past seen, at the moment the client sees it, with the
// re-creates seen since its last recorded one, and returns the Until seen.
func (c *client) seeExtension(l locker.Hold, h recorder.Hold, seen time.Time) time.Time {
	u := l.Until()
	if !u.After(seen) {
		return seen
	}
	h.Extend().Reacquired(c.newRecreates(l)).OK(c.realTime(u))
	c.probeHold(h)
	return u
}

// awaitFree waits, a TTL at most, until a quorum of the nodes answer that
// key does not exist (node 0, for a lock that lives there alone), asking them all every two hundredth of a TTL. It
// looks at the nodes directly, as no client of the lock can: the workload's
// way to extend a lapsed hold at the moment that shows a lock re-creating
// keys.
func (c *client) awaitFree(ctx context.Context, key string) {
	rdbs := c.rdbs
	if c.spec.single {
		rdbs = rdbs[:1] // the lock lives on node 0 alone
	}
	quorum := len(rdbs)/2 + 1
	deadline := time.Now().Add(c.cfg.TTL)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		var (
			wg   sync.WaitGroup
			free atomic.Int32
		)
		for _, rdb := range rdbs {
			wg.Go(func() {
				ectx, cancel := context.WithTimeout(ctx, c.cfg.NodeTimeout)
				defer cancel()
				if n, err := rdb.Exists(ectx, key).Result(); err == nil && n == 0 {
					free.Add(1)
				}
			})
		}
		wg.Wait()
		if int(free.Load()) >= quorum {
			return
		}
		sleepReal(ctx, c.cfg.TTL/200)
	}
}
