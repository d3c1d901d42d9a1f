package chaos

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/fencedlock/fencedlock/chaos/locker"
	"github.com/fencedlock/fencedlock/chaos/recorder"
)

// Shapes of the workload that reach what one goroutine per client and the
// hunt's long holds leave alone:
//
//   - lanes: several goroutines of one client share its redlock.Client, so
//     that its local wait queue forms and an Unlock hands the Client's place
//     in the nodes' waiting set to its next local waiter;
//   - bursts: runs of brief holds back to back, many acquisitions a second;
//   - last-moment extends: an extension sent with a node timeout or three
//     of validity left, then the hold kept to its new validity (an end that
//     an extension computes too late shows as an overlap);
//   - shrinks: an extension to a shorter TTL, then the hold kept until a
//     margin before the new end (an end that does not move back with the
//     keys' TTL shows as an overlap).

// huntLanes is the hunt's lanes per client: a head on the wire, a waiter
// its Unlock hands the place to, and one more behind that, which becomes
// the head with the place already its Client's.
const huntLanes = 3

// lanes runs cfg.Lanes goroutines of holds on c until ctx ends.
func (c *client) lanes(ctx context.Context) {
	var wg sync.WaitGroup
	for range c.cfg.Lanes {
		wg.Go(func() { c.lane(ctx) })
	}
	wg.Wait()
}

// lockedSource is a rand.Source that the lanes of a client share: the
// seeded stream stays one per client (math/rand/v2's Rand keeps no state
// but its source).
type lockedSource struct {
	mu  sync.Mutex // protects src
	src *rand.PCG
}

func (s *lockedSource) Uint64() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.src.Uint64()
}

// shape runs, for about a third of the hunt's holds, one of the shapes
// above on tg, and reports whether it did; the rest keep holds.go's mix.
func (c *client) shape(ctx context.Context, tg target) bool {
	switch n := c.rnd.IntN(100); {
	case n < 15:
		c.burst(ctx, tg)
	case n < 25:
		c.lastMoment(ctx, tg)
	case n < 35:
		c.shrink(ctx, tg)
	default:
		return false
	}
	return true
}

// burst makes three to six brief holds of tg back to back: acquire, write,
// unlock.
func (c *client) burst(ctx context.Context, tg target) {
	for range 3 + c.rnd.IntN(4) {
		l, h, ok := c.acquire(ctx, tg.key, false)
		if !ok {
			return
		}
		octx := context.WithoutCancel(ctx)
		c.writeIfValid(octx, l, h, tg.resource)
		c.unlock(octx, l, h)
	}
}

// lastMoment extends a hold of tg once or twice, each sent when one to
// three node timeouts of validity are left (an extension's calls are
// bounded by one), writing after each success; then it keeps the hold to
// its validity and unlocks after it, as a to-validity hold does.
func (c *client) lastMoment(ctx context.Context, tg target) {
	l, h, ok := c.acquire(ctx, tg.key, false)
	if !ok {
		return
	}
	octx := context.WithoutCancel(ctx)
	c.writeIfValid(octx, l, h, tg.resource)
	nt := c.cfg.NodeTimeout
	for range 1 + c.rnd.IntN(2) {
		slack := nt + time.Duration(c.rnd.Int64N(int64(2*nt)))
		sleepReal(ctx, l.Until().Sub(c.clk.Now())-slack)
		if ctx.Err() != nil || !c.extendFor(octx, l, h, c.cfg.TTL) {
			break
		}
		c.writeIfValid(octx, l, h, tg.resource)
	}
	sleepReal(ctx, l.Until().Sub(c.clk.Now())+c.cfg.TTL/50)
	c.unlock(octx, l, h)
}

// shrink extends a hold of tg, soon after its write, to a TTL of a quarter
// to a half of the workload's, then keeps it until an eighth of the
// workload's TTL before its Until and unlocks. The checker keeps a hold's
// longest validity (a shorter extension may not have landed), so the
// Unlock is what ends the hold there: the margin keeps a slow machine's
// wake-up from carrying it past the shorter keys' life, as writeIfValid's
// keeps a write.
func (c *client) shrink(ctx context.Context, tg target) {
	l, h, ok := c.acquire(ctx, tg.key, false)
	if !ok {
		return
	}
	octx := context.WithoutCancel(ctx)
	ttl := c.cfg.TTL
	c.writeIfValid(octx, l, h, tg.resource)
	sleepReal(ctx, time.Duration(c.rnd.Int64N(int64(ttl/8))))
	short := ttl/4 + time.Duration(c.rnd.Int64N(int64(ttl/4)))
	if c.extendFor(octx, l, h, short) {
		sleepReal(ctx, l.Until().Sub(c.clk.Now())-ttl/8)
	}
	c.unlock(octx, l, h)
}

// extendFor calls Extend for ttl and records it, with the re-creates seen
// since the hold's last recorded extension; it reports success.
func (c *client) extendFor(ctx context.Context, l locker.Hold, h recorder.Hold, ttl time.Duration) bool {
	e := h.Extend()
	ectx, cancel := context.WithTimeout(ctx, c.cfg.TTL)
	err := l.Extend(ectx, ttl)
	cancel()
	e.Reacquired(c.newRecreates(l))
	switch {
	case err == nil:
		e.OK(c.realTime(l.Until()))
		c.probeHold(h)
		return true
	case errors.Is(err, locker.ErrLost):
		e.LockLost()
	default:
		e.Fail(err)
	}
	return false
}
