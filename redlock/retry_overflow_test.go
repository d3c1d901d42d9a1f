package redlock_test

import (
	"context"
	"errors"
	"math"
	"math/big"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/redlock"
)

// FuzzBackoff: over the whole domain of base, max and attempt (any
// Duration, ≤ 0 and the int64 extremes included, any attempt), and any
// LimitRetry n, a wait is in [0, ceil] with ceil = min(max, base·2^(attempt-1))
// computed exactly, and LimitRetry goes on exactly while attempt ≤ n. It
// never panics. The seeds include three that panicked in rand.N: base <<
// (attempt-1) wrapped to a negative number.
func FuzzBackoff(f *testing.F) {
	for _, s := range []struct {
		base, max time.Duration
		attempt   int
		n         int
	}{
		{20 * time.Second, time.Minute, 30, 100},
		{time.Minute, 10 * time.Minute, 29, 100},
		{time.Hour, 2 * time.Hour, 24, 100},
		{math.MaxInt64, math.MaxInt64, 1, 1},
		{1, math.MaxInt64, 63, math.MaxInt},
		{1, math.MaxInt64, 64, math.MaxInt},
		{3, math.MaxInt64, 62, 62},
		{math.MinInt64, math.MinInt64, math.MinInt, math.MinInt},
		{0, 0, 0, 0},
		{-1, -1, -1, -1},
		{time.Millisecond, 0, math.MaxInt, math.MaxInt},
		{50 * time.Millisecond, 10 * time.Millisecond, 2, 1},
	} {
		f.Add(int64(s.base), int64(s.max), s.attempt, s.n)
	}
	f.Fuzz(func(t *testing.T, base, maxWait int64, attempt, n int) {
		ceil := backoffCeil(base, maxWait, attempt)
		s := redlock.ExponentialBackoff(time.Duration(base), time.Duration(maxWait))
		d, ok := s.Backoff(attempt)
		if !ok || d < 0 || d > ceil {
			t.Fatalf("ExponentialBackoff(%d, %d).Backoff(%d) = %v, %v; want ok and in [0, %v]", base, maxWait, attempt, d, ok, ceil)
		}
		for _, lim := range []struct {
			name string
			s    redlock.RetryStrategy
			ceil time.Duration
		}{
			{"LimitRetry", redlock.LimitRetry(s, n), ceil},
			{"LimitRetry(nil)", redlock.LimitRetry(nil, n), backoffCeil(0, 0, attempt)}, // the default strategy
		} {
			d, ok := lim.s.Backoff(attempt)
			switch {
			case ok != (attempt <= n):
				t.Fatalf("%s(n=%d).Backoff(%d): ok = %v", lim.name, n, attempt, ok)
			case !ok && d != 0:
				t.Fatalf("%s(n=%d).Backoff(%d) = %v after giving up", lim.name, n, attempt, d)
			case d < 0 || d > lim.ceil:
				t.Fatalf("%s(n=%d).Backoff(%d) = %v, want in [0, %v]", lim.name, n, attempt, d, lim.ceil)
			}
		}
	})
}

// backoffCeil is ExponentialBackoff's documented ceiling, in exact integer
// arithmetic: min(max, base·2^(attempt-1)) after the defaults (base ≤ 0:
// 16ms, max ≤ 0: 512ms, max below base: base), attempts below 1 as 1.
func backoffCeil(base, maxWait int64, attempt int) time.Duration {
	if base <= 0 {
		base = int64(16 * time.Millisecond)
	}
	if maxWait <= 0 {
		maxWait = int64(512 * time.Millisecond)
	}
	maxWait = max(maxWait, base)
	shift := max(attempt, 1) - 1
	if shift >= 64 { // base ≥ 1: past any int64
		return time.Duration(maxWait)
	}
	d := new(big.Int).Lsh(big.NewInt(base), uint(shift))
	if d.Cmp(big.NewInt(maxWait)) > 0 {
		return time.Duration(maxWait)
	}
	return time.Duration(d.Int64())
}

// countingRetry passes attempts to s and cancels once attempt reached stop.
type countingRetry struct {
	s       redlock.RetryStrategy
	stop    int
	cancel  context.CancelFunc
	highest atomic.Int64
}

func (c *countingRetry) Backoff(attempt int) (time.Duration, bool) {
	d, ok := c.s.Backoff(attempt)
	c.highest.Store(max(c.highest.Load(), int64(attempt)))
	if attempt >= c.stop {
		c.cancel()
	}
	return d, ok
}

// A Lock with a long exponential backoff behind a short-TTL, auto-extended
// holder sleeps no longer than the holder's PTTL each time, so it reaches
// the attempts at which base·2^(attempt-1) passes the int64 range within a
// few dozen TTLs (attempt 30 for a 20s base). Backoff then panicked on the
// caller's goroutine. The Lock must go on past them until its ctx ends.
func TestLockLongBackoffPastTheInt64Range(t *testing.T) {
	r := newRig(t, 3)
	nt := roomyNodeTimeout(measureRTT(t, r.clients))
	// The holder's key is kept by hand, its PX set again every tenth of its
	// TTL: nine tenths of slack before a stalled refresher lets it lapse (a
	// lock's watchdog, extending at a third, lapsed once under load, and
	// the waiter got the key).
	holderTTL := 6 * nt
	refresh := func() error {
		for _, rc := range r.clients {
			if err := rc.Set(t.Context(), "k", "holder", holderTTL).Err(); err != nil {
				return err
			}
		}
		return nil
	}
	if err := refresh(); err != nil {
		t.Fatal(err)
	}
	stopRefresh := make(chan struct{})
	refreshed := make(chan error, 1)
	go func() {
		tick := time.NewTicker(holderTTL / 10)
		defer tick.Stop()
		for {
			select {
			case <-stopRefresh:
				refreshed <- nil
				return
			case <-tick.C:
				if err := refresh(); err != nil {
					refreshed <- err
					return
				}
			}
		}
	}()
	// 20s·2^29 is past the int64 range: attempts 30 and on overflowed.
	const stop = 34
	// Each attempt sleeps at most the holder's PTTL plus a jitter of 2ms
	// (or twice the attempt, after a refusal), and takes at most a node
	// timeout and its grace on the wire: three node timeouts with the sleep.
	bound := stop * (holderTTL + 2*time.Millisecond + 4*nt)
	ctx, cancel := context.WithTimeout(t.Context(), bound)
	defer cancel()
	retry := &countingRetry{s: redlock.ExponentialBackoff(20*time.Second, time.Minute), stop: stop, cancel: cancel}
	waiter := r.client(t, redlock.WithNodeTimeout(nt))
	start := time.Now()
	err := callNoPanic(t, func() error {
		l, err := waiter.Lock(ctx, "k", time.Minute, redlock.WithLockRetry(retry))
		if err == nil {
			return errors.New("acquired the holder's key, held until " + l.Until().String())
		}
		return err
	})
	t.Logf("attempt %d in %v (holder's ttl %v)", retry.highest.Load(), time.Since(start), holderTTL)
	close(stopRefresh)
	if err := <-refreshed; err != nil {
		t.Fatalf("keeping the holder's key: %v", err)
	}
	if got := retry.highest.Load(); got < stop {
		t.Fatalf("attempt %d within %v, want %d (Lock: %v)", got, bound, stop, err)
	}
	if !errors.Is(err, redlock.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock: %v, want ErrNotAcquired joined with the cancel at attempt %d", err, stop)
	}
}
