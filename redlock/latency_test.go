package redlock_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// measureRTT is the slowest of a few PING round trips to each node, after a
// first one that dials: the unit the timing bounds of these tests are
// multiples of, so that they stretch on a loaded machine instead of failing.
func measureRTT(t testing.TB, nodes []redis.UniversalClient) time.Duration {
	t.Helper()
	var worst time.Duration
	for i, n := range nodes {
		if err := n.Ping(t.Context()).Err(); err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		for range 10 {
			start := time.Now()
			if err := n.Ping(t.Context()).Err(); err != nil {
				t.Fatalf("node %d: %v", i, err)
			}
			worst = max(worst, time.Since(start))
		}
	}
	t.Logf("slowest PING round trip: %v", worst)
	return worst
}

// roomyNodeTimeout is a node timeout that healthy nodes meet even when the
// machine is busy: a hundred of the slowest round trips measured, and not
// below 20ms, since a quiet moment's PING says little about the next
// scheduler hiccup of a loaded 2-core machine.
func roomyNodeTimeout(rtt time.Duration) time.Duration {
	return max(100*rtt, 20*time.Millisecond)
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
