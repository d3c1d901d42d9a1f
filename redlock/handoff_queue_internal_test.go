package redlock

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/internal/redistest"
)

// An Unlock that hands the key on releases the old hold, on each node, with
// the transfer script: that call is the Unlock's release there. When it
// timed out in its node's queue (a call ahead of it on a frozen node) it is
// skipped like an acquire, and the Unlock sends nothing more once a quorum
// transferred: the old hold's grant stayed on that node for its whole TTL,
// although every hold was unlocked (attack 8, 10 runs of 10). Now a
// transfer that failed on a node releases the old hold there (releaseFrom).
func TestHandOffWhoseTransferTimedOutInTheQueueReleasesTheOldHold(t *testing.T) {
	const key = "a8-transfer"
	procs := redistest.StartN(t, 3)
	nodes := make([]redis.UniversalClient, 3)
	for i, p := range procs {
		rc := redis.NewClient(&redis.Options{Addr: p.Addr(), ReadTimeout: time.Minute})
		t.Cleanup(func() { _ = rc.Close() })
		nodes[i] = rc
	}
	rtt := redistest.PingRTT(t, nodes)
	nt := max(100*rtt, 50*time.Millisecond)
	c, err := New(nodes, WithNodeTimeout(nt), WithRetry(attack4Fixed(time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx := t.Context()
	poll := func(what string, limit time.Duration, cond func() bool) {
		t.Helper()
		end := time.Now().Add(limit)
		for !cond() {
			if time.Now().After(end) {
				t.Fatalf("setup: %s not within %v", what, limit)
			}
			time.Sleep(rtt)
		}
	}

	// A key on the same worker queue of node 2 as key: its call blocks the
	// queue while node 2 is frozen.
	b2 := c.batchers[2]
	qi := b2.queue(&op{keys: []string{key}})
	blocker := b2.sameQueueKey(key)

	holder, err := c.TryLock(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	headRes := make(chan *Lock, 1)
	go func() {
		l, err := c.Lock(ctx, key, time.Minute)
		if err != nil {
			t.Errorf("head: %v", err)
		}
		headRes <- l
	}()
	poll("a head offering", 200*nt, func() bool {
		c.waiters.mu.Lock()
		defer c.waiters.mu.Unlock()
		q := c.waiters.queues[key]
		return q != nil && q.offer != nil
	})

	if err := procs[2].Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			_ = procs[2].Resume()
		}
	})
	bl, err := c.TryLock(ctx, blocker, time.Minute) // nodes 0 and 1 grant; node 2's call sits on the wire
	if err != nil {
		t.Fatal(err)
	}
	poll("the blocker's call taken off node 2's queue", 200*nt, func() bool { return len(qi) == 0 })

	if err := holder.Unlock(ctx); err != nil { // hands on: transfer on every node
		t.Fatalf("unlock: %v", err)
	}
	var l2 *Lock
	select {
	case l2 = <-headRes:
	case <-time.After(200 * nt):
		t.Fatal("setup: the head was not handed the key")
	}
	if l2 == nil {
		t.FailNow()
	}
	if l2.a.from != holder.Value() {
		t.Fatalf("setup: the head's hold was not made by a transfer")
	}
	// node 2's transfer completes as a timeout while still queued.
	poll("node 2's transfer timing out", 200*nt, func() bool {
		l2.a.mu.Lock()
		defer l2.a.mu.Unlock()
		return l2.a.answered[2]
	})
	if err := l2.Unlock(ctx); err != nil {
		t.Fatalf("unlock of the handed hold: %v", err)
	}
	_ = bl.Unlock(ctx)
	if err := procs[2].Resume(); err != nil {
		t.Fatal(err)
	}
	resumed = true
	// Node 2 was marked down by its timeouts: calls fail at once (releases
	// but) until its first reply after the resume lifts the mark.
	poll("node 2 answering again", 200*nt, func() bool { return !c.isDown(2) })
	// A probe on the same queue: once it answers, everything queued before
	// it on node 2 went (or was dropped).
	if _, err := c.call(2, extendScript, 200*nt, []string{key}, "probe", 1000); err != nil {
		t.Fatalf("probe: %v", err)
	}
	for i, n := range nodes {
		v := n.Get(ctx, key).Val()
		if v != "" {
			t.Errorf("node %d: every hold unlocked, yet the key holds %q (old hold %q, handed hold %q), PTTL %v",
				i, v, holder.Value(), l2.Value(), n.PTTL(ctx, key).Val())
		}
	}
}
