package redlock_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/internal/redistest"
	"github.com/fencedlock/fencedlock/redlock"
)

// K separate Clients (as K processes) contend for one key, with one of 5
// nodes down from the start (its subscriptions never confirm), and a
// backoff far longer than the run: only wake-ups move the waiters, as the
// doc of Lock says ("a release wakes it at once"). Every Unlock announces
// its release on every live node, and nothing is lost or forged: after a
// release, some waiter must take the key within a few yields. The longest
// time the key stays free while every Client waits (from an Unlock's
// return to the next grant) must stay within that. (Held on be8a260: no
// stall seen in runs of 2s, the longest gap about 100ms, a yield.)
func TestAttack4NoStallWithNodeDownAndLongBackoff(t *testing.T) {
	t.Parallel() // its bound is a third of the run, several yields: runs beside the others of its kind
	r := newRig(t, 5)
	t.Cleanup(func() { awaitNoDialProbes(t) }) // after the clients' Close
	rtt := redistest.PingRTT(t, r.clients)
	if err := r.procs[4].Kill(); err != nil {
		t.Fatal(err)
	}
	const k, hold = 4, time.Millisecond
	d := max(2*time.Second, 1000*rtt)
	nodeTimeout := max(50*time.Millisecond, 20*rtt)
	ttl := 6 * nodeTimeout
	backoff := 100 * d // never runs out within the run
	clients := make([]*redlock.Client, k)
	for i := range clients {
		nodes := make([]redis.UniversalClient, len(r.procs))
		for j, p := range r.procs {
			c := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, DialTimeout: nodeTimeout,
				ContextTimeoutEnabled: true})
			t.Cleanup(func() { _ = c.Close() })
			nodes[j] = c
			if p.Running() {
				warm(t, c, nodeTimeout)
			}
		}
		c, err := redlock.New(nodes, redlock.WithNodeTimeout(nodeTimeout), redlock.WithRetry(fixedBackoff(backoff)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		clients[i] = c
	}
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
	// A wake-up, a yield to the Client named (32 of the Client's own round
	// trips to a quorum, which under -race on a loaded machine are several
	// PINGs: a yield of 100ms was seen) and an attempt: a third of the run
	// is room for several. A lost wake-up stalls the key until the run ends.
	bound := max(d/3, 200*rtt)
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

// awaitNoDialProbes waits until go-redis's dial probes for a dead node
// (pool.tryDial: a retry every second, until the pool is closed) are gone,
// so that goleak, at the end of a run of this test alone, does not count
// them. Polls the goroutines' stacks, bounded.
func awaitNoDialProbes(t *testing.T) {
	buf := make([]byte, 1<<20)
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := runtime.Stack(buf, true)
		if !strings.Contains(string(buf[:n]), "(*ConnPool).tryDial") || time.Now().After(deadline) {
			return
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, bounded
	}
}
