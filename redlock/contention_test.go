package redlock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/redlock"
)

type contention struct {
	holds, timedOut int64
	perClient       []int64
}

// contend runs k separate Clients (as k processes would be) that loop Lock,
// hold for hold, Unlock on one key for d, and counts the holds granted, per
// client too, and the Lock calls that gave up after lockTimeout.
func contend(t *testing.T, r *rig, k int, ttl, nodeTimeout, lockTimeout, hold, d time.Duration) contention {
	t.Helper()
	clients := make([]*redlock.Client, k)
	for i := range clients {
		nodes := make([]redis.UniversalClient, len(r.procs))
		for j, p := range r.procs {
			c := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, DialTimeout: nodeTimeout,
				ContextTimeoutEnabled: true})
			t.Cleanup(func() { _ = c.Close() })
			nodes[j] = c
		}
		c, err := redlock.New(nodes, redlock.WithNodeTimeout(nodeTimeout))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		clients[i] = c
	}
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
			rtt := pingRTT(t, r.clients)
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
			const k, d, hold = 6, 3 * time.Second, time.Millisecond
			nodeTimeout := max(50*time.Millisecond, 20*rtt)
			ttl := 6 * nodeTimeout
			one := contend(t, r, 1, ttl, nodeTimeout, 2*ttl, hold, d)
			many := contend(t, r, k, ttl, nodeTimeout, 2*ttl, hold, d)
			t.Logf("%s (rtt %v): 1 client: %d holds; %d clients: %d holds, %d Locks timed out after %v, per client %v",
				fault, rtt, one.holds, k, many.holds, many.timedOut, 2*ttl, many.perClient)
			if many.holds < max(int64(k), one.holds/20) {
				t.Errorf("%d clients got %d holds in %v, one client alone %d: the lock stalls under contention",
					k, many.holds, d, one.holds)
			}
			for i, n := range many.perClient {
				if n == 0 {
					t.Errorf("client %d starved: no hold in %v", i, d)
				}
			}
		})
	}
}
