package redlock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/redlock"
)

// waitForSubscriber polls PUBSUB NUMSUB until someone listens for key's
// releases on node 0 (a condition with a deadline, not a sleep).
func waitForSubscriber(t *testing.T, r *rig, key string) {
	t.Helper()
	ch := "fencedlock:released:" + key
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if n := r.clients[0].PubSubNumSub(t.Context(), ch).Val()[ch]; n > 0 {
			return
		}
		time.Sleep(time.Millisecond) // polling a server-side condition
	}
	t.Fatal("no waiter subscribed")
}

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
			type result struct {
				l   *redlock.Lock
				err error
				at  time.Time
			}
			got := make(chan result, 1)
			go func() {
				wl, err := waiter.Lock(ctx, "k", time.Minute)
				got <- result{wl, err, time.Now()}
			}()
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

// fixedBackoff always waits d: no jitter that could retry early by chance.
type fixedBackoff time.Duration

func (f fixedBackoff) Backoff(int) (time.Duration, bool) { return time.Duration(f), true }
