package redlock

import (
	"math"
	"math/rand/v2"
	"time"
)

// RetryStrategy tells a blocking Lock how long to wait before attempt number
// attempt (1 for the first retry). ok = false stops retrying: Lock then
// returns [ErrNotAcquired]. A strategy must be safe for concurrent use.
//
// Lock never sleeps longer than the current holder's remaining TTL, and a
// release that frees the key for the waiter wakes it early. The backoff
// for a retry is asked for before the attempt it follows: a refusal keeps
// the waiter's place on the nodes for that long (see [Client.Lock]).
type RetryStrategy interface {
	Backoff(attempt int) (d time.Duration, ok bool)
}

// NoRetry makes Lock behave like TryLock: one attempt.
func NoRetry() RetryStrategy { return noRetry{} }

type noRetry struct{}

func (noRetry) Backoff(int) (time.Duration, bool) { return 0, false }

// ExponentialBackoff waits a random duration in [0, min(max, base·2^(attempt-1))]
// ("full jitter"), so that waiters spread out instead of retrying in step.
// base ≤ 0 means 16ms, max ≤ 0 means 512ms: long, because releases wake
// waiters and the backoff is only the net for a wake that never comes. A
// max below base is base. Any base, max and attempt are valid (an attempt
// below 1 counts as 1): the product is exact, never wrapped, so a wait is
// always in [0, max].
func ExponentialBackoff(base, max time.Duration) RetryStrategy {
	if base <= 0 {
		base = 16 * time.Millisecond
	}
	if max <= 0 {
		max = 512 * time.Millisecond
	}
	if max < base {
		max = base
	}
	return expBackoff{base: base, max: max}
}

type expBackoff struct{ base, max time.Duration }

func (b expBackoff) Backoff(attempt int) (time.Duration, bool) {
	ceil := b.max
	// base·2^shift ≤ max exactly when base ≤ max>>shift (0 for shift ≥ 63,
	// and base ≥ 1): the shift is taken only when it stays below max, so it
	// never leaves the int64 range.
	if shift := max(attempt, 1) - 1; shift < 63 && b.base <= b.max>>shift {
		ceil = b.base << shift
	}
	if ceil == math.MaxInt64 { // ceil+1 would wrap; Int64 spans [0, MaxInt64]
		return time.Duration(rand.Int64()), true
	}
	return rand.N(ceil + 1), true
}

// LimitRetry stops s after n retries (none for n ≤ 0). A nil s means
// ExponentialBackoff(0, 0).
func LimitRetry(s RetryStrategy, n int) RetryStrategy {
	if s == nil {
		s = ExponentialBackoff(0, 0)
	}
	return limitRetry{s: s, n: n}
}

type limitRetry struct {
	s RetryStrategy
	n int
}

func (l limitRetry) Backoff(attempt int) (time.Duration, bool) {
	if attempt > l.n {
		return 0, false
	}
	return l.s.Backoff(attempt)
}
