package redlock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/internal/redistest"
	"github.com/fencedlock/fencedlock/redlock"
)

type contention struct {
	holds, timedOut int64
	perClient       []int64
}

// separateClients returns k Clients on r's nodes, each with redis clients
// of its own, as k processes would have.
func separateClients(t *testing.T, r *rig, k int, nodeTimeout time.Duration) []*redlock.Client {
	t.Helper()
	clients := make([]*redlock.Client, k)
	for i := range clients {
		nodes := make([]redis.UniversalClient, len(r.procs))
		for j, p := range r.procs {
			c := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, DialTimeout: nodeTimeout,
				ContextTimeoutEnabled: true})
			t.Cleanup(func() { _ = c.Close() })
			nodes[j] = c
			if p.Running() && !p.Paused() {
				warm(t, c, nodeTimeout)
			}
		}
		c, err := redlock.New(nodes, redlock.WithNodeTimeout(nodeTimeout))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		clients[i] = c
	}
	return clients
}

// warm dials c before anything is timed: on a loaded machine a dial and its
// handshake can take longer than a short node timeout, and a run that
// starts with every client dialling spends its time failing to.
func warm(t *testing.T, c *redis.Client, nodeTimeout time.Duration) {
	t.Helper()
	for range 50 {
		ctx, cancel := context.WithTimeout(t.Context(), 4*nodeTimeout)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
	}
	t.Logf("%s: no connection after 50 tries", c.Options().Addr)
}

// contend runs k separate Clients (as k processes would be) that loop Lock,
// hold for hold, Unlock on one key for d, and counts the holds granted, per
// client too, and the Lock calls that gave up after lockTimeout.
func contend(t *testing.T, r *rig, k int, ttl, nodeTimeout, lockTimeout, hold, d time.Duration) contention {
	t.Helper()
	clients := separateClients(t, r, k, nodeTimeout)
	var (
		ok, bad atomic.Int64
		inside  atomic.Int32
		wg      sync.WaitGroup
	)
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	per := make([]atomic.Int64, k)
	for id, c := range clients {
		wg.Go(func() {
			for ctx.Err() == nil {
				lctx, lcancel := context.WithTimeout(ctx, lockTimeout)
				l, err := c.Lock(lctx, "hot", ttl)
				lcancel()
				if err != nil {
					if ctx.Err() == nil {
						bad.Add(1)
					}
					if !errors.Is(err, redlock.ErrNotAcquired) {
						t.Errorf("Lock: %v", err)
						return
					}
					continue
				}
				if inside.Add(1) > 1 {
					t.Error("two holders at once")
				}
				ok.Add(1)
				per[id].Add(1)
				time.Sleep(hold) // the critical section
				inside.Add(-1)
				_ = l.Unlock(context.WithoutCancel(ctx))
			}
		})
	}
	wg.Wait()
	out := contention{holds: ok.Load(), timedOut: bad.Load(), perClient: make([]int64, k)}
	for i := range per {
		out.perClient[i] = per[i].Load()
	}
	return out
}

// K separate Clients contending on one key keep being granted it, with all
// nodes up and with a minority of nodes killed or frozen: waiters in
// different processes must not split the nodes' votes for ever, and none of
// them may starve. The bar is set by what one client alone gets in the same
// run, on the same nodes.
func TestContendingClientsWithNodeDown(t *testing.T) {
	for _, fault := range []string{"healthy", "killed", "paused"} {
		t.Run(fault, func(t *testing.T) {
			r := newRig(t, 5)
			// The node timeout and TTL scale with this run's round trip, so
			// that a loaded machine is measured against itself.
			rtt := redistest.PingRTT(t, r.clients)
			switch fault {
			case "killed":
				if err := r.procs[4].Kill(); err != nil {
					t.Fatal(err)
				}
			case "paused":
				if err := r.procs[4].Pause(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = r.procs[4].Resume() })
			}
			// One client alone is measured for a quarter as long as the K
			// (its rate is steady; the K need the time for every one of
			// them to get the key). The K must keep a twentieth of its rate.
			const k, d, hold = 6, 2 * time.Second, time.Millisecond
			nodeTimeout := max(50*time.Millisecond, 20*rtt)
			ttl := 6 * nodeTimeout
			one := contend(t, r, 1, ttl, nodeTimeout, 2*ttl, hold, d/4)
			many := contend(t, r, k, ttl, nodeTimeout, 2*ttl, hold, d)
			t.Logf("%s (rtt %v): 1 client: %d holds in %v; %d clients: %d holds in %v, %d Locks timed out after %v, per client %v",
				fault, rtt, one.holds, d/4, k, many.holds, d, many.timedOut, 2*ttl, many.perClient)
			if many.holds < max(int64(k), one.holds/5) {
				t.Errorf("%d clients got %d holds in %v, one client alone %d in %v: the lock stalls under contention",
					k, many.holds, d, one.holds, d/4)
			}
			for i, n := range many.perClient {
				if n == 0 {
					t.Errorf("client %d starved: no hold in %v", i, d)
				}
			}
		})
	}
}

// setCalls sums the SET commands the nodes ran (inside scripts too) since
// their stats were last reset: one per node an acquire asked.
func setCalls(t *testing.T, r *rig) int64 {
	t.Helper()
	return cmdCalls(t, r, "set")
}

// A release does not set off the herd: of the heads that it wakes, one in
// each waiting process, the first to ask usually takes the key, announces
// its grants, and the others let it pass instead of asking every node in
// turn. Counted on the nodes: with every head asking at each release, K
// processes make about K asks of every node per hold.
func TestReleaseWakesNoHerd(t *testing.T) {
	r := newRig(t, 5)
	rtt := redistest.PingRTT(t, r.clients)
	const k, d, hold = 8, 1500 * time.Millisecond, time.Millisecond
	nodeTimeout := max(50*time.Millisecond, 20*rtt)
	ttl := 6 * nodeTimeout
	for i, c := range r.clients {
		if err := c.ConfigResetStat(t.Context()).Err(); err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
	}
	got := contend(t, r, k, ttl, nodeTimeout, 2*ttl, hold, d)
	asks := float64(setCalls(t, r)) / float64(len(r.procs))
	perHold := asks / float64(max(got.holds, 1))
	t.Logf("%d clients, %d holds in %v (per client %v): %.0f asks of each node, %.2f per hold",
		k, got.holds, d, got.perClient, asks, perHold)
	if got.holds < k {
		t.Fatalf("%d holds: too few to judge", got.holds)
	}
	if perHold > 0.7*k {
		t.Errorf("%.2f asks of each node per hold among %d processes: a release wakes the herd", perHold, k)
	}
}
