// Package backendtest holds what the tests of every chaos backend share:
// the checks each backend.Backend must pass (Check...), run against each
// implementation by its own tests, which add what is particular to it; and
// small helpers for tests that talk to nodes. It is for tests only.
package backendtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/chaos/internal/faketime"
	"github.com/fencedlock/fencedlock/chaos/internal/testenv"
)

// NewClient returns a client with short timeouts and no retries, so that a
// faulty node shows at once; closed at the end of the test.
func NewClient(t testing.TB, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr:         addr,
		DialTimeout:  300 * time.Millisecond,
		ReadTimeout:  150 * time.Millisecond,
		WriteTimeout: 150 * time.Millisecond,
		MaxRetries:   -1,
		PoolSize:     2,
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Eventually polls f until it returns nil, and fails t if timeout passes
// first.
func Eventually(t testing.TB, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after %v: %v", what, timeout, err)
		}
		select {
		case <-tick.C:
		case <-t.Context().Done():
			t.Fatalf("%s: %v", what, t.Context().Err())
		}
	}
}

// Get returns the value of key, "" if it is missing.
func Get(ctx context.Context, c *redis.Client, key string) (string, error) {
	v, err := c.Get(ctx, key).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return v, err
}

// ServerTime is the node's clock, read with TIME.
func ServerTime(t testing.TB, c *redis.Client) time.Time {
	t.Helper()
	var tm time.Time
	Eventually(t, 2*time.Second, "TIME", func() error {
		var err error
		tm, err = c.Time(t.Context()).Result()
		return err
	})
	return tm
}

// MinRTT is the fastest of n PINGs.
func MinRTT(t testing.TB, c *redis.Client, n int) time.Duration {
	t.Helper()
	best := time.Duration(1 << 62)
	for range n {
		start := time.Now()
		if err := c.Ping(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
		best = min(best, time.Since(start))
	}
	return best
}

// LatencyFor is a latency to add that a machine whose fastest PING takes
// base tells apart from no latency: 60ms, or four times base when that is
// more.
func LatencyFor(base time.Duration) time.Duration { return max(60*time.Millisecond, 4*base) }

// HasFaketime reports whether libfaketime is installed on this machine.
func HasFaketime() bool { return faketime.Find() != "" }

// RequireFaketime skips t, or fails it under CI=true, when libfaketime is
// not installed.
func RequireFaketime(t testing.TB) {
	t.Helper()
	if !HasFaketime() {
		testenv.SkipOrFail(t, "libfaketime is not installed (scripts/deps.sh; Debian: apt-get install libfaketime)")
	}
}
