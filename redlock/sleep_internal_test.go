package redlock

import (
	"math"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/clock"
)

// A waiter woken by a release reports what was left of its sleep. When the
// injected clock went back meanwhile (a Fake set to an earlier time), the
// elapsed time is negative: d minus it wrapped past MaxInt64 into a
// negative rest, which the head then took as none at all.
func TestSleepLeftWhenTheClockWentBack(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    time.Duration
		back time.Duration
	}{
		{"longest sleep, an hour back", math.MaxInt64, time.Hour},
		{"a day's sleep, a century back", 24 * time.Hour, 100 * 365 * 24 * time.Hour},
		{"a second's sleep, a nanosecond back", time.Second, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			fake := clock.NewFake(start)
			c := &Client{cfg: config{clock: fake}, closing: make(chan struct{})}
			released := make(chan struct{})
			errc := make(chan error, 1)
			go func() {
				errc <- fake.BlockUntilContext(t.Context(), 1) // the sleep's timer is armed
				fake.Set(start.Add(-tc.back))
				close(released)
			}()
			left, woken, err := c.sleep(t.Context(), released, nil, tc.d)
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			if err != nil || !woken {
				t.Fatalf("sleep: woken %v, err %v; want woken by the release", woken, err)
			}
			if left != tc.d {
				t.Fatalf("left %v of a sleep of %v after the clock went back, want all of it", left, tc.d)
			}
		})
	}
}
