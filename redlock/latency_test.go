package redlock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/internal/redistest"
	"github.com/fencedlock/fencedlock/redlock"
)

// measureRTT warms the nodes up (see warmUp) and returns redistest.PingRTT.
func measureRTT(t testing.TB, nodes []redis.UniversalClient) time.Duration {
	t.Helper()
	warmUp(t, nodes)
	return redistest.PingRTT(t, nodes)
}

// warmUp takes and releases a lock on nodes with a client of its own, so
// that what the test measures next pays neither for dialling, nor for
// loading the scripts (a first EVALSHA is answered NOSCRIPT), nor for
// building the fence key table. Close waits for its releases.
func warmUp(t testing.TB, nodes []redis.UniversalClient) {
	t.Helper()
	c, err := redlock.New(nodes)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, err := c.TryLock(t.Context(), "warm-up", time.Minute)
	if err != nil {
		t.Fatalf("warm-up: %v", err)
	}
	if err := l.Unlock(t.Context()); err != nil {
		t.Fatalf("warm-up: %v", err)
	}
}

// roomyNodeTimeout is a node timeout that healthy nodes meet even when the
// machine is busy: a hundred of the slowest round trips measured, and not
// below 50ms, since a quiet moment's PING says little about the next
// scheduler hiccup of a loaded 2-core machine under the race detector.
func roomyNodeTimeout(rtt time.Duration) time.Duration {
	return max(100*rtt, 50*time.Millisecond)
}

// eventually polls cond (a condition on the servers or the client) until it
// holds, and fails the test when deadline passes first.
func eventually(t testing.TB, deadline time.Time, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not by the deadline", what)
		}
		time.Sleep(time.Millisecond) // polling a condition, bounded by deadline
	}
}

// setupHold takes key for a minute, for a test that needs it held before
// it starts, not for what it tests: a node timeout derived from measured
// round trips can still be missed on a loaded machine (a scheduler stall
// of the first call on fresh connections), and a grant that came too late
// is released in the background. So it tries again until it holds the key,
// for up to 10 s.
func setupHold(t testing.TB, c *redlock.Client, key string) *redlock.Lock {
	t.Helper()
	var l *redlock.Lock
	eventually(t, time.Now().Add(10*time.Second), "hold "+key, func() bool {
		var err error
		l, err = c.TryLock(t.Context(), key, time.Minute)
		if err != nil && !errors.Is(err, redlock.ErrNotAcquired) {
			t.Fatal(err)
		}
		return err == nil
	})
	return l
}
