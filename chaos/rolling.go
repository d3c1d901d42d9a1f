package chaos

import (
	"context"
	"time"

	"github.com/fencedlock/fencedlock/chaos/locker"
	"github.com/fencedlock/fencedlock/chaos/recorder"
)

// The rolling profile's workload (ProfileRolling), on one key: client 0
// keeps one auto-extended hold for the whole run (longHold); every other
// client, and client 0 once its hold is lost, contends for the key with
// brief holds (contend), so that exclusion and fencing meet the restarted
// nodes: a contender's attempt is granted by a node that lost the long
// hold's key, and the long hold's next extension must re-create the key
// there or find it taken. The contenders begin once the long hold is
// taken (longHeld), so that it is taken on every node, as a hold that
// was running before an operator began the restarts: each restart then
// takes its key from one node.

// rolling is the lane of a client of the rolling profile.
func (c *client) rolling(ctx context.Context) {
	if c.id == 0 {
		c.longHold(ctx)
	} else {
		select {
		case <-c.longHeld:
		case <-ctx.Done():
		}
	}
	for ctx.Err() == nil {
		c.contend(ctx)
	}
}

// longHold takes an auto-extended hold of the key (trying again until it
// gets one) and keeps it until the run ends, looking at it every quarter
// TTL: each extension seen is recorded with the re-creates it brought
// (seeExtension), a write with its token goes to the store every TTL while
// the validity allows (writeIfValid), and Done closing is recorded as the
// loss, after which the hold is released and longHold returns.
func (c *client) longHold(ctx context.Context) {
	var (
		l  locker.Hold
		h  recorder.Hold
		ok bool
	)
	for !ok && ctx.Err() == nil {
		l, h, ok = c.acquire(ctx, lockKey, true)
	}
	close(c.longHeld)
	if !ok {
		return
	}
	octx := context.WithoutCancel(ctx) // finish the hold when the run ends meanwhile
	ttl := c.cfg.TTL
	c.writeIfValid(octx, l, h, resource)
	seen := l.Until()
	for tick := 1; ctx.Err() == nil; tick++ {
		sleepReal(ctx, ttl/4)
		select {
		case <-l.Done():
			h.Lost()
			c.unlock(octx, l, h)
			return
		default:
		}
		seen = c.seeExtension(l, h, seen)
		if tick%4 == 0 {
			c.writeIfValid(octx, l, h, resource)
		}
	}
	c.unlock(octx, l, h)
}

// contend is one brief hold: a TryLock, or a Lock that waits half a TTL
// at most, then a write and the unlock. A failed attempt is followed by a
// pause of up to a tenth of a TTL (after the probe of what it left, see
// acquireBy), so that the contenders do not spin on a held key.
func (c *client) contend(ctx context.Context) {
	ttl := c.cfg.TTL
	try := c.rnd.IntN(2) == 0
	l, h, ok := c.acquireBy(ctx, lockKey, func(ctx context.Context) (locker.Hold, error) {
		if try {
			tctx, cancel := context.WithTimeout(ctx, ttl)
			defer cancel()
			return c.lk.TryLock(tctx, lockKey, ttl)
		}
		wctx, cancel := context.WithTimeout(ctx, ttl/2)
		defer cancel()
		return c.lk.Lock(wctx, lockKey, ttl)
	})
	if !ok {
		sleepReal(ctx, time.Duration(c.rnd.Int64N(int64(ttl/10))+1))
		return
	}
	octx := context.WithoutCancel(ctx)
	c.writeIfValid(octx, l, h, resource)
	sleepReal(ctx, time.Millisecond+time.Duration(c.rnd.Int64N(int64(4*time.Millisecond))))
	c.unlock(octx, l, h)
}

// newRecreates returns the re-creates of l's key (locker.Reacquirer) that
// no recorded extension of l carries yet, and counts them as recorded:
// the caller records them on the extension it records now. A re-create
// that answers after its Extend returned is thus recorded on the next.
func (c *client) newRecreates(l locker.Hold) []int {
	r, ok := l.(locker.Reacquirer)
	if !ok {
		return nil
	}
	all := r.Reacquired()
	c.valuesMu.Lock()
	defer c.valuesMu.Unlock()
	if c.recorded == nil {
		c.recorded = map[string]int{}
	}
	n := c.recorded[l.Value()]
	c.recorded[l.Value()] = len(all)
	return all[n:]
}

// forgetRecreates drops what newRecreates counted for l, once it is over.
func (c *client) forgetRecreates(l locker.Hold) {
	c.valuesMu.Lock()
	defer c.valuesMu.Unlock()
	delete(c.recorded, l.Value())
}
