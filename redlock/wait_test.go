package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/clock"
	"github.com/fencedlock/fencedlock/redlock"
)

// A blocking Lock waits for the key and wakes when a quorum of nodes
// announced a release that frees it for the waiter (docs/protocol.md,
// the waiting rule). These tests watch the waiting set on the nodes and
// drive the announcements by hand where the rule's corners need it.

func TestWaiterWakesOnRelease(t *testing.T) {
	for _, tc := range []struct {
		name        string
		sameProcess bool
	}{{"other process (pub/sub)", false}, {"same process (local queue)", true}} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, 3)
			// A backoff far longer than the test: only a wake-up can get the
			// waiter the lock in time.
			slow := redlock.WithRetry(fixedBackoff(time.Minute))
			holder := r.client(t, slow)
			waiter := holder
			if !tc.sameProcess {
				waiter = r.client(t, slow)
			}
			ctx := t.Context()
			l, err := holder.TryLock(ctx, "k", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			got := startLock(ctx, waiter, "k", time.Minute)
			waitForSubscriber(t, r, "k")
			released := time.Now()
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			res := <-got
			if res.err != nil {
				t.Fatal(res.err)
			}
			wait := res.at.Sub(released)
			t.Logf("waiter acquired %v after the release", wait)
			if wait > 5*time.Second {
				t.Fatalf("waiter took %v after the release: it was not woken", wait)
			}
			if res.l.Token() <= l.Token() {
				t.Fatalf("waiter token %d after %d", res.l.Token(), l.Token())
			}
			_ = res.l.Unlock(ctx)
		})
	}
}

func TestManyWaitersMutualExclusion(t *testing.T) {
	r := newRig(t, 3)
	c := r.client(t)
	ctx := t.Context()
	var (
		inside  atomic.Int32
		overlap atomic.Bool
		mu      sync.Mutex // protects tokens
		tokens  []uint64
		wg      sync.WaitGroup
	)
	for range 8 {
		wg.Go(func() {
			for range 10 {
				l, err := c.Lock(ctx, "hot", 5*time.Second)
				if err != nil {
					t.Error(err)
					return
				}
				if inside.Add(1) > 1 {
					overlap.Store(true)
				}
				mu.Lock()
				tokens = append(tokens, l.Token())
				mu.Unlock()
				inside.Add(-1)
				if err := l.Unlock(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if overlap.Load() {
		t.Fatal("two holders inside at once")
	}
	if len(tokens) != 80 {
		t.Fatalf("%d acquisitions, want 80", len(tokens))
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("tokens not increasing in acquisition order: %d then %d", tokens[i-1], tokens[i])
		}
	}
}

func TestLockGivesUp(t *testing.T) {
	r := newRig(t, 3)
	c := r.client(t)
	ctx := t.Context()
	l, err := c.TryLock(ctx, "k", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)

	t.Run("ctx deadline", func(t *testing.T) {
		dctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		_, err := c.Lock(dctx, "k", time.Second)
		if !errors.Is(err, redlock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%v, want ErrNotAcquired joined with DeadlineExceeded", err)
		}
	})
	t.Run("retries exhausted", func(t *testing.T) {
		_, err := c.Lock(ctx, "k", time.Second, redlock.WithLockRetry(redlock.LimitRetry(redlock.ExponentialBackoff(time.Millisecond, time.Millisecond), 3)))
		if !errors.Is(err, redlock.ErrNotAcquired) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			t.Fatalf("%v, want ErrNotAcquired without a ctx error", err)
		}
	})
	t.Run("no retry", func(t *testing.T) {
		_, err := c.Lock(ctx, "k", time.Second, redlock.WithLockRetry(redlock.NoRetry()))
		if !errors.Is(err, redlock.ErrNotAcquired) {
			t.Fatalf("%v", err)
		}
	})
}

// A waiter wakes once a quorum of nodes announced, since its last try
// began, a release that frees the key for it: one that names it, nobody
// ("") or a younger waiter — in any mix. One that names an older waiter
// frees nothing (that node would grant the older one), and then only the
// waiter's backoff gets it the key. The holder's key is gone from every
// node before the announcements; the backoff is on a fake clock that moves
// only when the test says.
func TestWaiterWakesWhenAQuorumFreesTheKey(t *testing.T) {
	for _, tc := range []struct {
		name  string
		heads []string // what nodes 0..2 announce; "me" is the waiter, "younger" and "older" others
		wakes bool
	}{
		{"every node names the waiter", []string{"me", "me", "me"}, true},
		{"the waiter, nobody, a younger waiter", []string{"me", "", "younger"}, true},
		{"a quorum, the third node silent", []string{"younger", ""}, true},
		{"a quorum names an older waiter", []string{"older", "older", "me"}, false},
		{"one node only", []string{"me"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, 3)
			fake := clock.NewFake(epoch)
			c := r.client(t, redlock.WithClock(fake), redlock.WithRetry(fixedBackoff(time.Minute)))
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			r.holdByHand(t, "k", "holder")
			got := asleepOnFake(ctx, t, r, c, fake, "k")
			me := r.waiting(t, 0, "k")[0]
			since, id, _ := strings.Cut(me, " ")
			names := map[string]string{"me": me, "": "",
				"younger": since + " ffffffff", "older": fmt.Sprint(epoch.UnixMilli()-1) + " " + id}
			r.dropByHand(t, "k")
			for i, h := range tc.heads {
				r.announce(t, i, "k", names[h])
			}
			if tc.wakes {
				res := <-got
				if res.err != nil {
					t.Fatalf("waiter: %v", res.err)
				}
				_ = res.l.Unlock(ctx)
				return
			}
			if !absent(got, max(100*time.Millisecond, 50*r.rtt)) {
				t.Fatal("the waiter woke though no quorum freed the key for it")
			}
			fake.Advance(time.Minute) // its backoff: it asks, and the key is free
			res := <-got
			if res.err != nil {
				t.Fatalf("waiter after its backoff: %v", res.err)
			}
			_ = res.l.Unlock(ctx)
		})
	}
}

// A waiter's last try was refused by the holder on nodes 0, 1 and 2, and
// granted on 3 and 4, which it then released (a failed attempt steps back,
// and every release is announced: nobody waits there). When node 2 dies
// and the holder's release is announced on 0 and 1, the key is free for
// the waiter on 4 of 5 nodes: it must wake. (Its backoff is on a fake
// clock that never moves: only the announcements can wake it.)
func TestWaiterWakesOnAQuorumWithAHolderNodeDead(t *testing.T) {
	r := newRig(t, 5)
	fake := clock.NewFake(epoch)
	c := r.client(t, redlock.WithClock(fake), redlock.WithRetry(fixedBackoff(time.Minute)))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for _, rc := range r.clients[:3] {
		if err := rc.Set(ctx, "k", "holder", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	got := asleepOnFake(ctx, t, r, c, fake, "k")
	if err := r.procs[2].Kill(); err != nil {
		t.Fatal(err)
	}
	r.releaseByHand(t, 0, "k")
	r.releaseByHand(t, 1, "k")
	select {
	case res := <-got:
		if res.err != nil {
			t.Fatal(res.err)
		}
		_ = res.l.Unlock(ctx)
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter slept on though the key is free on 4 of 5 nodes and the holder's release was announced on every live node it held")
	}
}

// A hold that ends without a release — its process died, or it never
// unlocked — is announced by nobody: a waiter sleeps no longer than the
// holder's TTL (it reads the TTL in its refusal), however long its
// backoff, and takes the key then.
func TestWaiterTakesAnExpiredHoldAtItsTTL(t *testing.T) {
	r := newRig(t, 3)
	rtt := measureRTT(t, r.clients)
	nt := roomyNodeTimeout(rtt)
	c := r.client(t, redlock.WithNodeTimeout(nt), redlock.WithRetry(fixedBackoff(time.Hour)))
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	ttl := 10 * nt
	for _, rc := range r.clients {
		if err := rc.Set(ctx, "k", "crashed-holder", ttl).Err(); err != nil {
			t.Fatal(err)
		}
	}
	expires := time.Now().Add(ttl)
	res := <-startLock(ctx, c, "k", time.Minute)
	if res.err != nil {
		t.Fatal(res.err)
	}
	defer func() { _ = res.l.Unlock(ctx) }()
	// Its sleep ends at the TTL it read in its refusal, a round trip after
	// the key was set: then one attempt. Measured: a few ms after expiry.
	late := res.at.Sub(expires)
	t.Logf("the waiter took the key %v after the holder's key expired", late)
	if late > 4*nt {
		t.Errorf("the waiter took the expired key %v after its TTL ran out (node timeout %v): it slept on its backoff", late, nt)
	}
}

// K separate Clients (as K processes) contend for one key, with one of 5
// nodes down from the start (its subscriptions never confirm), and a
// backoff far longer than the run: only wake-ups move the waiters, as the
// doc of Lock says. Every Unlock announces its release on every live node
// to the first waiter, and nothing is lost or forged: after a release, the
// first waiter must take the key within a wake-up and an attempt. The
// longest time the key stays free while every Client waits (from an
// Unlock's return to the next grant) must stay within a few node timeouts;
// a lost wake-up stalls the key for the backoff, far past the run.
func TestNoStallWithNodeDownAndLongBackoff(t *testing.T) {
	t.Parallel() // its bound is a few node timeouts: runs beside the others of its kind
	r := newRig(t, 5)
	t.Cleanup(func() { awaitNoDialProbes(t) }) // after the clients' Close
	rtt := measureRTT(t, r.clients)
	if err := r.procs[4].Kill(); err != nil {
		t.Fatal(err)
	}
	const k, hold = 4, time.Millisecond
	d := max(2*time.Second, 1000*rtt)
	nodeTimeout := max(50*time.Millisecond, 20*rtt)
	ttl := 6 * nodeTimeout
	clients := separateClients(t, r, k, nodeTimeout, redlock.WithRetry(fixedBackoff(100*d)))
	var (
		mu       sync.Mutex
		freed    time.Time // when the last Unlock returned; zero while held
		longest  time.Duration
		holds    atomic.Int64
		inside   atomic.Int32
		wg       sync.WaitGroup
		per      = make([]atomic.Int64, k)
		stallErr atomic.Value
	)
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	for id, c := range clients {
		wg.Go(func() {
			for ctx.Err() == nil {
				l, err := c.Lock(ctx, "hot4", ttl)
				if err != nil {
					if !errors.Is(err, redlock.ErrNotAcquired) {
						stallErr.Store(err)
					}
					return
				}
				mu.Lock()
				if !freed.IsZero() {
					longest = max(longest, time.Since(freed))
				}
				freed = time.Time{}
				mu.Unlock()
				if inside.Add(1) > 1 {
					t.Error("two holders at once")
				}
				holds.Add(1)
				per[id].Add(1)
				time.Sleep(hold) // the critical section
				inside.Add(-1)
				_ = l.Unlock(context.WithoutCancel(ctx))
				mu.Lock()
				freed = time.Now()
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err, _ := stallErr.Load().(error); err != nil {
		t.Errorf("Lock: %v", err)
	}
	mu.Lock()
	if !freed.IsZero() {
		longest = max(longest, time.Since(freed)) // the key was free at the end
	}
	mu.Unlock()
	perClient := make([]int64, k)
	for i := range per {
		perClient[i] = per[i].Load()
	}
	// A wake-up is a message on the pub/sub connections of a quorum, then
	// one attempt (a node timeout at worst, with the dead node marked down
	// or timing out). At the start a release may come while the others
	// still wait for their subscriptions (a quorum's confirmations and as
	// long again: a node timeout at most), then ask. Measured: up to 90ms
	// at the first hold, up to 30ms after it, under -race; a few node
	// timeouts cover a loaded machine's delays. A lost wake-up takes the
	// run (the holder's TTL would cut it: 6 node timeouts).
	bound := max(d/4, 8*nodeTimeout)
	t.Logf("rtt %v: %d holds in %v, per client %v; the key stayed free while all waited up to %v (bound %v)",
		rtt, holds.Load(), d, perClient, longest, bound)
	if longest > bound {
		t.Errorf("the key stayed free %v while %d Clients waited on it (every release announced on every live node): a lost wake-up", longest, k)
	}
	for i, n := range perClient {
		if n == 0 {
			t.Errorf("client %d starved: no hold in %v", i, d)
		}
	}
}
