package redlock

import (
	"math"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// FuzzDriftOf: for any drift factor the config accepts and any ttl the API
// accepts (checkArgs: 1ms up to MaxInt64), the drift allowance is at least
// ttl·f and 2ms and at most MaxInt64: never wrapped into a negative number,
// which would make the validity longer than the ttl.
func FuzzDriftOf(f *testing.F) {
	for _, s := range []struct {
		ttl   time.Duration
		drift float64
	}{
		{math.MaxInt64, math.Nextafter(1, 0)},
		{math.MaxInt64, 0.01},
		{math.MaxInt64 - 1, 0.999},
		{1500 * time.Microsecond, 0.01},
		{time.Millisecond, math.SmallestNonzeroFloat64},
		{1 << 62, 0.5},
		{time.Minute, 1e13},
		{time.Minute, math.Inf(1)},
		{time.Minute, math.NaN()},
		{time.Minute, -1},
	} {
		f.Add(int64(s.ttl), s.drift)
	}
	node := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	f.Cleanup(func() { _ = node.Close() })
	f.Fuzz(func(t *testing.T, ttl int64, drift float64) {
		if ttl < int64(time.Millisecond) {
			return // checkArgs refuses it before driftOf
		}
		c, err := New([]redis.UniversalClient{node}, WithDriftFactor(drift)) // no I/O
		if err != nil {
			return // a factor out of range
		}
		defer c.Close()
		d := c.driftOf(time.Duration(ttl))
		if d < 2*time.Millisecond || float64(d) < float64(ttl)*c.cfg.drift*(1-1e-15) {
			t.Fatalf("driftOf(%v) with factor %v = %v, want at least 2ms and ttl·f", time.Duration(ttl), c.cfg.drift, d)
		}
	})
}
