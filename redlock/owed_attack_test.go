package redlock_test

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/redlock"
)

// A node frozen for longer than the TTL runs the acquires it had read when
// it resumes: their keys are set then, and live a whole TTL from then. The
// node is reachable again long before that TTL runs out, so the README's
// "no grant left behind" (for "nodes reachable again before the key's TTL
// runs out") and Claim 4 promise that the owed releases remove them. They
// do not: each owed release gave up once ttl+drift had passed since it was
// owed, counted on the assumption that "the grant, if any, was made before
// the release is owed" (owe.go), which a frozen node breaks.
func TestOwedReleaseOutlastsAFreezeLongerThanTheTTL(t *testing.T) {
	const (
		nodeTimeout = 50 * time.Millisecond
		ttl         = 2 * time.Second
		keys        = 4
	)
	for _, tc := range []struct {
		name   string
		frozen []int
		run    func(t *testing.T, c *redlock.Client, key func(int) string)
	}{
		{
			name: "step backs", frozen: []int{1, 2},
			run: func(t *testing.T, c *redlock.Client, key func(int) string) {
				var wg sync.WaitGroup
				errs := make([]error, keys)
				for k := range keys {
					wg.Go(func() { _, errs[k] = c.TryLock(t.Context(), key(k), ttl) })
				}
				wg.Wait()
				for k, err := range errs {
					if !errors.Is(err, redlock.ErrNotAcquired) {
						t.Fatalf("attempt %d: %v, want ErrNotAcquired", k, err)
					}
				}
			},
		},
		{
			name: "the rest of an Unlock", frozen: []int{2},
			run: func(t *testing.T, c *redlock.Client, key func(int) string) {
				for k := range keys {
					l, err := c.TryLock(t.Context(), key(k), ttl)
					if err != nil {
						t.Fatalf("lock %d: %v", k, err)
					}
					if err := l.Unlock(t.Context()); err != nil {
						t.Fatalf("unlock %d: %v", k, err)
					}
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ctxTimeoutRig(t, 3)
			c := r.client(t, redlock.WithNodeTimeout(nodeTimeout))
			l, err := c.TryLock(t.Context(), "warm-up", ttl)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Unlock(t.Context()); err != nil {
				t.Fatal(err)
			}
			key := func(k int) string { return fmt.Sprintf("%s-%d", t.Name(), k) }
			for _, i := range tc.frozen {
				if err := r.procs[i].Pause(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = r.procs[i].Resume() })
			}
			start := time.Now()
			tc.run(t, c, key)
			// The fault: the nodes stay frozen for a TTL and a half.
			time.Sleep(max(ttl+ttl/2-time.Since(start), 0))
			for _, i := range tc.frozen {
				if err := r.procs[i].Resume(); err != nil {
					t.Fatal(err)
				}
			}
			resumed := time.Now()
			// Reachable again now, and the keys set on resume live a TTL
			// from now: an owed release still being retried (at most 8
			// node timeouts apart) lands well within half of it.
			deadline := resumed.Add(ttl / 2)
			for {
				left, pttl := 0, time.Duration(0)
				for k := range keys {
					for _, i := range tc.frozen {
						if d := r.clients[i].PTTL(t.Context(), key(k)).Val(); d > 0 {
							left++
							pttl = max(pttl, d)
						}
					}
				}
				if left == 0 {
					t.Logf("no grant left %v after the nodes resumed", time.Since(resumed))
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d grants still held %v after the nodes resumed (PTTL up to %v): the owed releases gave up while the nodes were frozen", left, time.Since(resumed), pttl)
				}
				time.Sleep(5 * time.Millisecond) // polling a server condition, bounded
			}
		})
	}
}

// A node frozen until late in the TTL (here seven eighths of it), and so
// reachable again before the TTL runs out, is still released: its owed
// releases are not given up while it gives no reply. (They went 1, 2, 4, 8
// node timeouts apart and stopped at the TTL counted from when they were
// owed, the last one long before it: with a TTL of 16 node timeouts, about
// 10 node timeouts in; with the defaults and a TTL of 13s, about 19 of 26.)
func TestOwedReleaseIsTriedWhileTheTTLLasts(t *testing.T) {
	for _, tc := range []struct {
		name        string
		ttl         time.Duration
		nodeTimeout time.Duration // 0: the default
	}{
		{"ttl of 16 node timeouts", 1600 * time.Millisecond, 100 * time.Millisecond},
		{"defaults, ttl 13s", 13 * time.Second, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ttl := tc.ttl
			r := ctxTimeoutRig(t, 3)
			log := &recorder{}
			opts := []redlock.Option{redlock.WithLogger(slog.New(log))}
			if tc.nodeTimeout > 0 {
				opts = append(opts, redlock.WithNodeTimeout(tc.nodeTimeout))
			}
			c, err := redlock.New(r.clients, opts...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			warm, err := c.TryLock(t.Context(), "warm-up", ttl)
			if err != nil {
				t.Fatal(err)
			}
			if err := warm.Unlock(t.Context()); err != nil {
				t.Fatal(err)
			}
			if err := r.procs[2].Pause(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = r.procs[2].Resume() })
			const key = "owed-while-ttl-lasts"
			start := time.Now()
			l, err := c.TryLock(t.Context(), key, ttl)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Unlock(t.Context()); err != nil { // node 2's part is owed
				t.Fatal(err)
			}
			// Node 2 is owed two releases of the value: the rest of the
			// Unlock, and the step back of the acquire that timed out.
			// It stays frozen until late in the TTL, then resumes: reachable
			// again before the TTL ran out, it must be released.
			time.Sleep(max(ttl-ttl/8-time.Since(start), 0)) // the freeze lasts
			gaveUp := len(log.find(slog.LevelDebug, "release given up"))
			if err := r.procs[2].Resume(); err != nil {
				t.Fatal(err)
			}
			resumed := time.Since(start)
			t.Logf("node 2 resumed at %v (TTL %v); %d releases given up by then", resumed, ttl, gaveUp)
			if resumed >= ttl {
				t.Fatalf("inconclusive: node 2 resumed %v after the lock, not before its TTL", resumed)
			}
			deadline := time.Now().Add(ttl / 4)
			for {
				if r.clients[2].Get(t.Context(), key).Val() != l.Value() {
					t.Logf("node 2 does not hold the value %v after it resumed (%d releases given up)", time.Since(start)-resumed, len(log.find(slog.LevelDebug, "release given up")))
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("node 2 still holds the unlocked value %v after it resumed (PTTL %v; resumed %v after the lock was taken, TTL %v): %d owed releases given up before",
						time.Since(start)-resumed, r.clients[2].PTTL(t.Context(), key).Val(), resumed, ttl, gaveUp)
				}
				time.Sleep(5 * time.Millisecond) // polling a server condition, bounded
			}
		})
	}
}
