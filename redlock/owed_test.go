package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/clock"
	"github.com/fencedlock/fencedlock/redlock"
)

// A release the protocol owes is sent again until it lands: once briefly
// frozen nodes resume, no grant is left there, although each first release
// timed out (go-redis dropped the connection at the ctx deadline, and a new
// one cannot complete its handshake with a frozen node).
//
// Frozen longer than the TTL, a node runs the acquires it had read when it
// resumes, with a whole TTL from then: the releases owed for them are still
// being tried (a try without a reply moves their end), and land.
func TestOwedReleaseReachesANodeThatWasFrozen(t *testing.T) {
	const (
		nodeTimeout = 50 * time.Millisecond
		keys        = 8
	)
	for _, freeze := range []struct {
		name   string
		ttl    time.Duration
		frozen time.Duration // how long the nodes stay frozen
	}{
		{"briefly", 8 * time.Second, 5 * nodeTimeout},
		{"past the TTL", 2 * time.Second, 3 * time.Second},
	} {
		t.Run(freeze.name, func(t *testing.T) {
			ttl := freeze.ttl
			for _, tc := range []struct {
				name   string
				frozen []int
				// while the nodes are frozen: locks on keys[k] that must not stay
				run func(t *testing.T, c *redlock.Client, key func(int) string)
			}{
				{
					// Failed attempts step back from the grants they may have.
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
					// Unlock decides on the quorum that answered; the frozen
					// node's release is the rest of it.
					name: "the rest of an Unlock", frozen: []int{2},
					run: func(t *testing.T, c *redlock.Client, key func(int) string) {
						var wg sync.WaitGroup
						for k := range keys {
							wg.Go(func() {
								// Lock, not TryLock: what is tested is the
								// Unlock; with a node frozen, a loaded
								// machine's answers from the other two can
								// come past the node timeout once.
								lctx, cancel := context.WithTimeout(t.Context(), ttl)
								defer cancel()
								l, err := c.Lock(lctx, key(k), ttl)
								if err != nil {
									t.Errorf("lock %d: %v", k, err)
									return
								}
								if err := l.Unlock(t.Context()); err != nil {
									t.Errorf("unlock %d: %v", k, err)
								}
							})
						}
						wg.Wait()
					},
				},
			} {
				t.Run(tc.name, func(t *testing.T) {
					r := ctxTimeoutRig(t, 3)
					c := r.client(t, redlock.WithNodeTimeout(nodeTimeout))
					l, err := c.TryLock(t.Context(), "warm-up", ttl) // as the finding's set-up
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
					// The fault: the nodes stay frozen, well past every first release.
					time.Sleep(max(freeze.frozen-time.Since(start), 0))
					for _, i := range tc.frozen {
						if err := r.procs[i].Resume(); err != nil {
							t.Fatal(err)
						}
					}
					resumed := time.Now()
					// A leftover grant would stay for a TTL from the resume at
					// least: wait far less than that, and far more than a retry
					// takes (at most 8 node timeouts apart).
					deadline := resumed.Add(ttl / 4)
					for {
						left := 0
						for k := range keys {
							left += r.anyKey(t, key(k))
						}
						if left == 0 {
							t.Logf("no grant left %v after the nodes resumed", time.Since(resumed))
							return
						}
						if time.Now().After(deadline) {
							t.Fatalf("%d grants still held %v after the nodes resumed", left, time.Since(resumed))
						}
						time.Sleep(5 * time.Millisecond) // polling a server condition, bounded
					}
				})
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

// The retries of an owed release wait on the Client's clock: one is sent
// when its backoff has passed there; one for a node that gives no reply,
// and is marked down, waits past the TTL (the node may run the grant when
// it resumes, with a whole TTL from then) and goes when the node is up;
// Close drops the rest.
func TestOwedReleaseRetriesOnTheClientClock(t *testing.T) {
	const ttl = 10 * time.Second
	resume := func(t *testing.T, r *rig) {
		t.Helper()
		if err := r.procs[2].Resume(); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		// after the first retry is armed, with node 2 still frozen
		then      func(t *testing.T, r *rig, c *redlock.Client, f *clock.Fake, log *recorder)
		wantGrant bool // node 2 keeps the grant once it resumes
	}{
		{
			name: "lands when its backoff passed",
			then: func(t *testing.T, r *rig, c *redlock.Client, f *clock.Fake, _ *recorder) {
				resume(t, r)
				f.Advance(time.Second) // past the backoff (8 node timeouts at most)
			},
		},
		{
			// Marked down (health.go), it is sent nothing: the release
			// waits for the node, past the TTL, and goes when it is up.
			name: "waits past the TTL for a node that gives no reply",
			then: func(t *testing.T, r *rig, c *redlock.Client, f *clock.Fake, log *recorder) {
				f.Advance(ttl + time.Second) // its retry goes, times out: parked
				deadline := time.Now().Add(5 * time.Second)
				for f.Timers() != 0 || !log.has(slog.LevelWarn, "node down") {
					if time.Now().After(deadline) {
						t.Fatalf("the release still has a timer armed (%d), or node 2 was not marked down", f.Timers())
					}
					time.Sleep(time.Millisecond) // polling, bounded
				}
				if log.has(slog.LevelDebug, "release given up") {
					t.Fatal("given up while the node gave no reply")
				}
				resume(t, r) // the probe finds it up: the release goes
			},
		},
		{
			name: "given up by Close",
			then: func(t *testing.T, r *rig, c *redlock.Client, f *clock.Fake, log *recorder) {
				_ = c.Close()
				if n := f.Timers(); n != 0 {
					t.Fatalf("%d timers armed after Close", n)
				}
				resume(t, r)
			},
			wantGrant: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ctxTimeoutRig(t, 3)
			f := clock.NewFake(time.Now())
			log := &recorder{}
			c := r.client(t, redlock.WithNodeTimeout(50*time.Millisecond), redlock.WithClock(f),
				redlock.WithLogger(slog.New(log)))
			l, err := c.TryLock(t.Context(), "owed", ttl)
			if err != nil {
				t.Fatal(err)
			}
			r.settled(t, "owed", l.Value()) // node 2 granted too
			if err := r.procs[2].Pause(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = r.procs[2].Resume() })
			if err := l.Unlock(t.Context()); err != nil { // node 2's release times out
				t.Fatal(err)
			}
			// Its first send failed: the release is scheduled again, or
			// parked until the node is up (when it was marked down first).
			awaitLog(t, log, slog.LevelWarn, "node down")
			tc.then(t, r, c, f, log)
			rdb := r.clients[2]
			deadline := time.Now().Add(5 * time.Second)
			for {
				held := rdb.Get(t.Context(), "owed").Val() == l.Value()
				if held == tc.wantGrant && (!held || rdb.PTTL(t.Context(), "owed").Val() > 0) {
					if !held {
						return // released
					}
					if f.Timers() != 0 {
						t.Fatalf("a retry is still armed")
					}
					return // kept: nothing will release it before its TTL
				}
				if time.Now().After(deadline) {
					t.Fatalf("node 2 holds the key: %v, want %v (get %q, pttl %v, timers %d)", held, tc.wantGrant, rdb.Get(t.Context(), "owed").Val(), rdb.PTTL(t.Context(), "owed").Val(), f.Timers())
				}
				time.Sleep(time.Millisecond) // polling a server condition, bounded
			}
		})
	}
}

// awaitLog waits until log has a record at level that mentions substr.
func awaitLog(t *testing.T, log *recorder, level slog.Level, substr string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !log.has(level, substr) {
		if time.Now().After(deadline) {
			t.Fatalf("no log record %q; node errors: %v", substr, log.find(slog.LevelDebug, "node error"))
		}
		time.Sleep(time.Millisecond) // polling the client's log, bounded
	}
}

// ctxTimeoutRig is n nodes whose clients are built as the README advises:
// go-redis gives up a call at its ctx deadline, and drops that connection
// (so a call queued behind one to a frozen node is not held back with it).
func ctxTimeoutRig(t *testing.T, n int) *rig {
	t.Helper()
	r := newRig(t, n)
	for i, p := range r.procs {
		rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = rdb.Close() })
		if err := rdb.Ping(t.Context()).Err(); err != nil { // a connection in the pool
			t.Fatal(err)
		}
		r.clients[i] = rdb
	}
	return r
}
