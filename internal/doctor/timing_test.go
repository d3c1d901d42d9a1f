package doctor

import (
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/clock"
	"github.com/fencedlock/fencedlock/internal/redistest"
	"github.com/fencedlock/fencedlock/redlock"
)

// TestTimingMatchesLock checks the drift allowance derived here against a
// lock client with its defaults: on a fake clock that does not move, a hold
// is valid for exactly ttl minus the allowance.
func TestTimingMatchesLock(t *testing.T) {
	rdb := redistest.Clients(t, redistest.StartN(t, 1))
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fake := clock.NewFake(start)
	// A node timeout no loaded machine outlasts: the default for a 100ms
	// TTL is 5ms, which a first call (the script sent by source) can miss,
	// and the allowance compared here does not depend on it.
	locks, err := redlock.New(rdb, redlock.WithClock(fake), redlock.WithNodeTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer locks.Close()
	if err := rdb[0].Ping(t.Context()).Err(); err != nil { // dial outside the short node timeouts
		t.Fatal(err)
	}
	for _, ttl := range []time.Duration{100 * time.Millisecond, time.Second, 10 * time.Second, time.Minute} {
		t.Run(ttl.String(), func(t *testing.T) {
			l, err := locks.TryLock(t.Context(), "doctor:timing:"+ttl.String(), ttl)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Unlock(t.Context())
			if got, want := ttl-l.Until().Sub(start), timingFor(ttl).allowance; got != want {
				t.Errorf("the lock gives up %v of a %v ttl, doctor assumes %v", got, ttl, want)
			}
		})
	}
}

func TestNodeTimeout(t *testing.T) {
	cases := []struct{ ttl, want time.Duration }{
		{10 * time.Millisecond, 5 * time.Millisecond}, // ttl/20 below the floor
		{time.Second, 50 * time.Millisecond},          // ttl/20
		{10 * time.Second, 500 * time.Millisecond},    // at the ceiling
		{time.Minute, 500 * time.Millisecond},         // past it
	}
	for _, tc := range cases {
		if got := timingFor(tc.ttl).nodeTimeout; got != tc.want {
			t.Errorf("ttl %v: node timeout %v, want %v", tc.ttl, got, tc.want)
		}
	}
}
