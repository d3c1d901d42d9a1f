package redlock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/clock"
	"github.com/fencedlock/fencedlock/redlock"
)

// A waiter's place on the nodes (docs/protocol.md, the waiting rule): it
// lasts as long as its lease (its planned backoff, a drift allowance and a
// node timeout, on the node's clock), so that a waiter that dies keeps it
// only that long; one that gives up withdraws it at once; one that takes
// the key leaves none behind.

// asleepOrDone waits until fake has a timer armed (the waiter sleeps
// again) or got has a result, which it returns.
func asleepOrDone(ctx context.Context, t *testing.T, fake *clock.Fake, got <-chan lockResult) (lockResult, bool) {
	t.Helper()
	bctx, cancel := context.WithCancel(ctx)
	defer cancel()
	armed := make(chan error, 1)
	go func() { armed <- fake.BlockUntilContext(bctx, 1) }()
	select {
	case res := <-got:
		return res, true
	case err := <-armed:
		if err != nil {
			t.Fatalf("the waiter neither slept nor returned: %v", err)
		}
		return lockResult{}, false
	}
}

// nodeMillis is node i's clock (Redis TIME) in ms: leases are on it.
func nodeMillis(t *testing.T, r *rig, i int) int64 {
	t.Helper()
	tm, err := r.clients[i].Time(t.Context()).Result()
	if err != nil {
		t.Fatalf("node %d: %v", i, err)
	}
	return tm.UnixMilli()
}

// (c) A waiter whose process died keeps its place only until its lease
// ends (its planned backoff, a drift allowance and a node timeout, on the
// node's clock): the next waiter's tries are refused until then, and its
// first try after that takes the key. The dead process sends nothing (its
// connections are closed), so nothing withdraws its place or announces
// the end of its lease: the next waiter's backoff (on a fake clock) is
// what brings it back.
func TestADeadWaiterKeepsItsPlaceOnlyUntilItsLease(t *testing.T) {
	r := newRig(t, 3)
	nt := roomyNodeTimeout(measureRTT(t, r.clients))
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	const key = "dead-waiter"
	backoff := 10 * nt // the dead one's: its lease is a little longer
	dfake := clock.NewFake(epoch)
	var conns []*redis.Client
	var nodes []redis.UniversalClient
	for _, p := range r.procs {
		rc := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, ContextTimeoutEnabled: true})
		conns = append(conns, rc)
		nodes = append(nodes, rc)
	}
	dead, err := redlock.New(nodes, redlock.WithNodeTimeout(nt), redlock.WithClock(dfake), redlock.WithRetry(fixedBackoff(backoff)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = dead.Close()
		for _, rc := range conns {
			_ = rc.Close()
		}
	})
	deadID := clientID(t, dead)
	r.holdByHand(t, key, "holder")
	asleepOnFake(ctx, t, r, dead, dfake, key)
	r.awaitWaiting(t, key, deadID)
	for _, rc := range conns { // the process dies
		_ = rc.Close()
	}
	efake := clock.NewFake(epoch.Add(time.Second))
	next := r.client(t, redlock.WithNodeTimeout(nt), redlock.WithClock(efake), redlock.WithRetry(fixedBackoff(time.Minute)))
	nextID := clientID(t, next)
	got := asleepOnFake(ctx, t, r, next, efake, key)
	r.awaitWaiting(t, key, deadID, nextID)
	_, leases := waitKeys(key)
	var leaseEnd int64
	for i, rc := range r.clients {
		end, err := rc.ZScore(ctx, leases, deadID).Result()
		if err != nil {
			t.Fatalf("node %d: the dead waiter's lease: %v", i, err)
		}
		leaseEnd = max(leaseEnd, int64(end))
	}
	for i := range r.clients {
		r.releaseByHand(t, i, key) // names the dead waiter: the next one sleeps on
	}

	efake.Advance(time.Minute) // the next waiter's backoff: it asks
	res, done := asleepOrDone(ctx, t, efake, got)
	now := nodeMillis(t, r, 0)
	if done {
		if res.err == nil {
			_ = res.l.Unlock(ctx)
		}
		if now < leaseEnd {
			t.Fatalf("the next waiter took the key (%v) %dms before the dead waiter's lease ended", res.err, leaseEnd-now)
		}
		t.Skipf("the machine took past the dead waiter's lease (%v) to make one try", backoff)
	}
	t.Logf("refused %dms before the dead waiter's lease ends", leaseEnd-now)
	eventually(t, time.Now().Add(2*time.Duration(leaseEnd-now)*time.Millisecond+time.Second), "the lease ended on every node", func() bool {
		for i := range r.clients {
			if nodeMillis(t, r, i) <= leaseEnd {
				return false
			}
		}
		return true
	})
	efake.Advance(time.Minute) // its next try
	select {
	case res := <-got:
		if res.err != nil {
			t.Fatal(res.err)
		}
		_ = res.l.Unlock(ctx)
	case <-time.After(20 * nt):
		t.Fatalf("the next waiter's try after the dead waiter's lease did not take the free key (waiting: %v)", r.waiting(t, 0, key))
	}
}

// (d) A waiter that gives up (its ctx ends) withdraws its place: the next
// waiter, or a TryLock, gets the free key at once, not after its lease
// (a minute and more here). Whether it gave up asleep (withdraw.lua
// removes its place and announces the next waiter) or while its try was on
// the wire (the try lands, is granted, and steps back: a release,
// announced like every release).
func TestAWaiterThatGivesUpWithdraws(t *testing.T) {
	for _, tc := range []struct {
		name   string
		onWire bool // it gives up while its try is held back on the nodes
		next   bool // a next waiter, else a TryLock
	}{
		{name: "asleep, the next waiter", next: true},
		{name: "asleep, a TryLock"},
		{name: "its try on the wire, the next waiter", onWire: true, next: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, 3)
			nt := roomyNodeTimeout(measureRTT(t, r.clients))
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			const key = "gives-up"
			gfake := clock.NewFake(epoch)
			quitter := r.client(t, redlock.WithNodeTimeout(max(nt, 2*time.Second)), redlock.WithClock(gfake),
				redlock.WithRetry(fixedBackoff(time.Minute)))
			r.holdByHand(t, key, "holder")
			qctx, quit := context.WithCancel(ctx)
			defer quit()
			quitting := asleepOnFake(qctx, t, r, quitter, gfake, key)
			var got <-chan lockResult
			var nextID string
			if tc.next {
				nfake := clock.NewFake(epoch.Add(time.Second))
				next := r.client(t, redlock.WithNodeTimeout(nt), redlock.WithClock(nfake), redlock.WithRetry(fixedBackoff(time.Minute)))
				nextID = clientID(t, next)
				got = asleepOnFake(ctx, t, r, next, nfake, key)
			}
			r.dropByHand(t, key) // free, unannounced: both sleep on
			if tc.onWire {
				unpause := pauseWrites(t, r)
				gfake.Advance(time.Minute) // its backoff: it tries
				awaitBlockedScript(ctx, t, r)
				quit()
				<-quitting
				unpause()
			} else {
				quit()
				<-quitting
			}
			quitAt := time.Now()
			if !tc.next {
				r.awaitWaiting(t, key) // withdrawn on every node
				other := r.client(t, redlock.WithNodeTimeout(nt))
				l, err := other.TryLock(ctx, key, time.Minute)
				if err != nil {
					t.Fatalf("TryLock once the waiter withdrew: %v", err)
				}
				t.Logf("withdrawn and taken %v after the waiter gave up", time.Since(quitAt))
				_ = l.Unlock(ctx)
				return
			}
			select {
			case res := <-got:
				if res.err != nil {
					t.Fatal(res.err)
				}
				t.Logf("the next waiter took the key %v after the first gave up", res.at.Sub(quitAt))
				_ = res.l.Unlock(ctx)
			case <-time.After(20 * nt):
				t.Fatalf("the next waiter still sleeps %v after the first gave up (waiting: %v, want [%s])",
					20*nt, r.waiting(t, 0, key), nextID)
			}
		})
	}
}

// A waiter that takes the key leaves no place behind on any node: it waits
// no more. Its try can be granted by a quorum and refused by a node where
// the release had not landed yet (an Unlock returns at a quorum of
// releases, and the waiter wakes on a quorum of announcements); that
// refusal wrote the waiter's place there, with the lease of a waiter (its
// backoff and more). Left, that place is first on that node for the whole
// lease: the node refuses every other caller, and with one more node down
// nobody can take the key though nobody waits. Here the release on node 2
// is lost, the key there expires after the waiter took it on 0 and 1, and
// then node 0 dies.
func TestAnAcquiredWaiterLeavesNoPlaceBehind(t *testing.T) {
	r := newRig(t, 3)
	nt := roomyNodeTimeout(measureRTT(t, r.clients))
	fake := clock.NewFake(epoch)
	w := r.client(t, redlock.WithNodeTimeout(nt), redlock.WithClock(fake), redlock.WithRetry(fixedBackoff(time.Minute)))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	const key = "no-place-behind"
	r.holdByHand(t, key, "holder")
	got := asleepOnFake(ctx, t, r, w, fake, key)
	r.awaitWaiting(t, key, clientID(t, w))
	r.releaseByHand(t, 0, key)
	r.releaseByHand(t, 1, key) // node 2's release is lost: "holder" stays there
	res := <-got
	if res.err != nil {
		t.Fatalf("the waiter, with the key free on 2 of 3 nodes: %v", res.err)
	}
	if err := r.clients[2].Del(ctx, key).Err(); err != nil { // the old hold's TTL ran out there
		t.Fatal(err)
	}
	if err := res.l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// The withdrawals go in the background, as the refusals come in: a few
	// node timeouts at most.
	for i := range r.clients {
		eventually(t, time.Now().Add(20*nt), fmt.Sprintf("node %d: no place left for %q after the waiter took the key and let it go", i, key),
			func() bool { return len(r.waiting(t, i, key)) == 0 })
	}
	if err := r.procs[0].Kill(); err != nil {
		t.Fatal(err)
	}
	other := r.client(t, redlock.WithNodeTimeout(nt))
	l, err := other.TryLock(ctx, key, time.Minute)
	if err != nil {
		t.Fatalf("TryLock on nodes 1 and 2, where the key is free and nobody waits: %v (node 2 keeps the place of a waiter that took the key: %v)",
			err, r.waiting(t, 2, key))
	}
	_ = l.Unlock(ctx)
}

// A waiter whose place was entered on fewer than a quorum of nodes (its
// try met node errors there) cannot be woken by a quorum of announcements,
// so it sleeps no longer than a node timeout whatever its backoff: with an
// hour's backoff it never woke (found under load by
// TestReleaseWakesOnlyTheHead). Here its try errors on nodes 1 and 2 (a
// fence counter that is not a number), then the key is freed everywhere with
// one announcement, node 0's.
func TestAPlaceOnAMinorityIsAskedAgainWithinANodeTimeout(t *testing.T) {
	r := newRig(t, 3)
	nt := roomyNodeTimeout(measureRTT(t, r.clients))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	const key = "minority-place"
	r.holdByHand(t, key, "holder")
	fence := redlock.FenceKey(key)
	for _, i := range []int{1, 2} {
		if err := r.clients[i].Set(ctx, fence, "not-a-counter", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	fake := clock.NewFake(epoch)
	w := r.client(t, redlock.WithNodeTimeout(nt), redlock.WithClock(fake), redlock.WithRetry(fixedBackoff(time.Hour)))
	got := asleepOnFake(ctx, t, r, w, fake, key)
	if len(r.waiting(t, 1, key)) != 0 || len(r.waiting(t, 2, key)) != 0 || len(r.waiting(t, 0, key)) != 1 {
		t.Fatalf("want the waiter's place on node 0 alone; waiting: %v, %v, %v",
			r.waiting(t, 0, key), r.waiting(t, 1, key), r.waiting(t, 2, key))
	}
	for _, i := range []int{1, 2} {
		if err := r.clients[i].Del(ctx, fence).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// As release.lua does: node 0 names its first waiter; nodes 1 and 2 have
	// none and announce nothing. One announcement: no quorum.
	r.releaseByHand(t, 0, key)
	for _, i := range []int{1, 2} {
		if err := r.clients[i].Del(ctx, key).Err(); err != nil {
			t.Fatal(err)
		}
	}
	fake.Advance(nt)
	select {
	case res := <-got:
		if res.err != nil {
			t.Fatal(res.err)
		}
		_ = res.l.Unlock(ctx)
	case <-time.After(20 * nt): // a bound on a waiter that sleeps on, not a synchronisation
		t.Fatalf("the waiter, whose place is on 1 of 3 nodes, did not ask again a node timeout (%v) after its try, the key free on every node", nt)
	}
}

// A waiter's lease on a node is the sleep it will take: its backoff, but no
// longer than the holder's key has left there (acquire.lua caps it at the
// PTTL, as the waiter caps its sleep), and a node timeout. Uncapped, a
// waiter with an hour's backoff that died kept its place, and every younger
// waiter out, for the hour.
func TestAPlaceLastsNoLongerThanTheHoldersKey(t *testing.T) {
	r := newRig(t, 3)
	nt := roomyNodeTimeout(measureRTT(t, r.clients))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	const key = "pttl-cap"
	const holdTTL = 5 * time.Second
	for _, rc := range r.clients {
		if err := rc.Set(ctx, key, "holder", holdTTL).Err(); err != nil {
			t.Fatal(err)
		}
	}
	fake := clock.NewFake(epoch)
	w := r.client(t, redlock.WithNodeTimeout(nt), redlock.WithClock(fake), redlock.WithRetry(fixedBackoff(time.Hour)))
	id := clientID(t, w)
	asleepOnFake(ctx, t, r, w, fake, key)
	r.awaitWaiting(t, key, id)
	_, leases := waitKeys(key)
	for i, rc := range r.clients {
		end, err := rc.ZScore(ctx, leases, id).Result()
		if err != nil {
			t.Fatal(err)
		}
		left := time.Duration(int64(end)-nodeMillis(t, r, i)) * time.Millisecond
		// The slack: a node timeout, and a second for the drift allowance
		// and the time the test took since the key was set.
		if left > holdTTL+nt+time.Second {
			t.Errorf("node %d: the waiter's place lasts %v, past the holder's key (%v) and a node timeout (%v)", i, left, holdTTL, nt)
		}
	}
}
