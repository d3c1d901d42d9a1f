package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/redlock"
)

// TestExponentialBackoffJitter checks "full jitter": each wait is drawn
// uniformly from [0, ceil], ceil = min(max, base·2^(attempt-1)), so that
// waiters spread out instead of retrying in step.
func TestExponentialBackoffJitter(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name    string
		b       redlock.RetryStrategy
		attempt int
		ceil    time.Duration
	}{
		{"first", redlock.ExponentialBackoff(10*ms, 100*ms), 1, 10 * ms},
		{"doubled", redlock.ExponentialBackoff(10*ms, 100*ms), 3, 40 * ms},
		{"capped", redlock.ExponentialBackoff(10*ms, 100*ms), 5, 100 * ms},
		{"far past the cap", redlock.ExponentialBackoff(10*ms, 100*ms), 1000, 100 * ms},
		{"default base 16ms", redlock.ExponentialBackoff(0, 0), 1, 16 * ms},
		{"default cap 512ms", redlock.ExponentialBackoff(0, 0), 10, 512 * ms},
		{"max below base", redlock.ExponentialBackoff(50*ms, 10*ms), 2, 50 * ms},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 4000
			var lo, hi, sum time.Duration
			lo = tc.ceil
			distinct := map[time.Duration]bool{}
			for range n {
				d, ok := tc.b.Backoff(tc.attempt)
				if !ok {
					t.Fatal("ExponentialBackoff gave up")
				}
				if d < 0 || d > tc.ceil {
					t.Fatalf("wait %v outside [0, %v]", d, tc.ceil)
				}
				lo, hi, sum = min(lo, d), max(hi, d), sum+d
				distinct[d] = true
			}
			// Uniform over [0, ceil]: the extremes are reached, the mean is
			// the middle (±10% is over 10 standard deviations of it).
			mean := sum / n
			if lo > tc.ceil/20 || hi < tc.ceil*19/20 {
				t.Errorf("waits in [%v, %v], want spread over [0, %v]", lo, hi, tc.ceil)
			}
			if mean < tc.ceil*4/10 || mean > tc.ceil*6/10 {
				t.Errorf("mean wait %v, want about %v", mean, tc.ceil/2)
			}
			if len(distinct) < n/2 {
				t.Errorf("%d distinct waits of %d", len(distinct), n)
			}
		})
	}
}

// TestLockWaitsNoLongerThanTheHoldersTTL: a holder that never unlocks
// (nothing announces a release) leaves only its key's expiry to wait for.
// With a backoff of an hour, the waiter must still take the lock soon after
// the holder's remaining TTL, which the refusals told it.
func TestLockWaitsNoLongerThanTheHoldersTTL(t *testing.T) {
	r := newRig(t, 3)
	nt := roomyNodeTimeout(measureRTT(t, r.clients))
	holderTTL := 5 * nt
	holder := r.client(t, redlock.WithNodeTimeout(nt))
	waiter := r.client(t, redlock.WithNodeTimeout(nt), redlock.WithRetry(fixedBackoff(time.Hour)))
	start := time.Now()
	h, err := holder.TryLock(t.Context(), "k", holderTTL)
	if err != nil {
		t.Fatal(err)
	}
	// The key expires on the nodes by start+holderTTL; the waiter's retry,
	// a round trip, has a few node timeouts to spare.
	bound := holderTTL + 5*nt
	ctx, cancel := context.WithTimeout(t.Context(), 2*bound) // instead of an hour
	defer cancel()
	l, err := waiter.Lock(ctx, "k", time.Minute)
	if err != nil {
		t.Fatalf("Lock behind a holder that never unlocks: %v", err)
	}
	took := time.Since(start)
	t.Logf("holder's ttl %v: the waiter had the lock %v after the holder", holderTTL, took)
	if took < holderTTL-2*time.Millisecond { // Redis counts expiry in ms
		t.Errorf("the waiter took the lock %v after the holder, before the holder's ttl %v ran out", took, holderTTL)
	}
	if took > bound {
		t.Errorf("the waiter took the lock %v after the holder, want within %v (its ttl %v and 5 node timeouts)", took, bound, holderTTL)
	}
	if l.Token() <= h.Token() {
		t.Errorf("token %d after the holder's %d", l.Token(), h.Token())
	}
}
