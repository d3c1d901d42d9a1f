package doctor

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
)

// The latency check. Each call of the lock to a node must answer within the
// node timeout (by default a twentieth of the TTL, between 5ms and 500ms),
// which also covers the script and any queueing: a node whose round trip
// takes more than half of it fails calls at its first hiccup, and one whose
// median round trip reaches it fails most of them.

// pings is how many PINGs measure a node: odd, so that the median is one
// of them; the first call already warmed the connection (reach).
const pings = 5

// checkLatency measures the round trips and returns them (sorted), for the
// clock check's precision.
func checkLatency(ctx context.Context, rdb *redis.Client, t timing, f *nodeFacts) []time.Duration {
	var rtts []time.Duration
	for range pings {
		start := time.Now()
		if err := rdb.Ping(ctx).Err(); err != nil {
			f.add("latency", Fail, fmt.Sprintf("PING failed after %d answered: %v", len(rtts), Why(err)), "check the node and the network")
			return nil
		}
		rtts = append(rtts, time.Since(start))
	}
	slices.Sort(rtts)
	median, worst := rtts[len(rtts)/2], rtts[len(rtts)-1]
	measured := fmt.Sprintf("round trip median %v, max %v; node timeout %v (ttl %v)", round(median), round(worst), t.nodeTimeout, t.ttl)
	switch {
	case median >= t.nodeTimeout:
		f.add("latency", Fail, measured+": most calls to the node time out", recommend(worst, t))
	case worst*2 > t.nodeTimeout:
		f.add("latency", Warn, measured+": the slowest round trip leaves less than half the node timeout for the script and a busy moment", recommend(worst, t))
	default:
		f.add("latency", OK, measured, "")
	}
	return rtts
}

// recommend says how to give the node a timeout of twice its slowest round trip.
func recommend(worst time.Duration, t timing) string {
	want := 2 * worst
	if ttl := want * nodeTimeoutDivisor; want <= maxNodeTimeout {
		return fmt.Sprintf("a --ttl of at least %v (the node timeout is ttl/%d), or WithNodeTimeout(%v), or a node closer to the clients",
			round(ttl), nodeTimeoutDivisor, round(want))
	}
	return fmt.Sprintf("WithNodeTimeout(%v) (the default stops at %v), or a node closer to the clients", round(want), maxNodeTimeout)
}

// round shortens a duration for reading: to the microsecond below a
// millisecond, else to a tenth of a millisecond.
func round(d time.Duration) time.Duration {
	if d < time.Millisecond {
		return d.Round(time.Microsecond)
	}
	return d.Round(100 * time.Microsecond)
}
