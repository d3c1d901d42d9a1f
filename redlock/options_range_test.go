package redlock_test

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/clock"
	"github.com/fencedlock/fencedlock/redlock"
)

// Numeric options out of their documented range are bad input: New returns
// ErrInvalidArgument, before any I/O. Zero means the default, and every
// value in range is accepted.
func TestOptionRanges(t *testing.T) {
	r := newRig(t, 3)
	for _, tc := range []struct {
		name string
		opt  redlock.Option
		ok   bool
	}{
		{"drift NaN", redlock.WithDriftFactor(math.NaN()), false},
		{"drift +Inf", redlock.WithDriftFactor(math.Inf(1)), false},
		{"drift -Inf", redlock.WithDriftFactor(math.Inf(-1)), false},
		{"drift 1e13", redlock.WithDriftFactor(1e13), false},
		{"drift 1", redlock.WithDriftFactor(1), false},
		{"drift negative", redlock.WithDriftFactor(-0.01), false},
		{"drift smallest negative", redlock.WithDriftFactor(-math.SmallestNonzeroFloat64), false},
		{"drift 0 (default)", redlock.WithDriftFactor(0), true},
		{"drift smallest positive", redlock.WithDriftFactor(math.SmallestNonzeroFloat64), true},
		{"drift 0.5", redlock.WithDriftFactor(0.5), true},
		{"drift just below 1", redlock.WithDriftFactor(math.Nextafter(1, 0)), true},
		{"node timeout negative", redlock.WithNodeTimeout(-time.Millisecond), false},
		{"node timeout MinInt64", redlock.WithNodeTimeout(math.MinInt64), false},
		{"node timeout 0 (default)", redlock.WithNodeTimeout(0), true},
		{"node timeout 1ns", redlock.WithNodeTimeout(1), true},
		{"node timeout MaxInt64", redlock.WithNodeTimeout(math.MaxInt64), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := redlock.New(r.clients, tc.opt)
			if c != nil {
				t.Cleanup(func() { _ = c.Close() })
			}
			switch {
			case tc.ok && err != nil:
				t.Fatalf("New: %v", err)
			case !tc.ok && !errors.Is(err, redlock.ErrInvalidArgument):
				t.Fatalf("New: %v, want ErrInvalidArgument", err)
			case !tc.ok && c != nil:
				t.Fatal("New returned a Client with its error")
			}
		})
	}
}

// For any option values New accepts, a hold's Until is no later than the
// start of its attempt plus its ttl, on the client's clock (a fake one, so
// that start is exact), and the same holds for an Extend. Options out of
// range are refused by New (TestOptionRanges). A factor of 1e13 or +Inf with
// a 1.5ms ttl used to be accepted and gave an Until 292 years ahead: the
// drift's float-to-Duration conversion overflowed to MinInt64.
func TestUntilWithinTTL(t *testing.T) {
	r := newRig(t, 3)
	roomy := roomyNodeTimeout(measureRTT(t, r.clients))
	drifts := []float64{0, math.SmallestNonzeroFloat64, 1e-9, 0.01, 0.5, math.Nextafter(1, 0), 1, 1e13,
		math.Inf(1), math.Inf(-1), math.NaN(), -0.5}
	nodeTimeouts := []time.Duration{0, roomy, math.MaxInt64}
	ttls := []time.Duration{time.Millisecond, 1500 * time.Microsecond, 2*time.Millisecond + 1, 3 * time.Millisecond,
		10 * time.Millisecond, time.Minute, 1 << 62, math.MaxInt64}
	starts := []time.Time{epoch, time.Unix(0, 0), time.Date(2262, 1, 1, 0, 0, 0, 0, time.UTC)}
	held := 0 // holds checked: the property must not hold only vacuously
	for i, drift := range drifts {
		for _, nt := range nodeTimeouts {
			for _, start := range starts {
				name := fmt.Sprintf("drift=%v/nt=%v/start=%d", drift, nt, start.Year())
				t.Run(name, func(t *testing.T) {
					fake := clock.NewFake(start)
					c, err := redlock.New(r.clients, redlock.WithClock(fake), redlock.WithDriftFactor(drift), redlock.WithNodeTimeout(nt))
					if err != nil {
						if !errors.Is(err, redlock.ErrInvalidArgument) {
							t.Fatalf("New: %v", err)
						}
						return
					}
					t.Cleanup(func() { _ = c.Close() })
					for j, ttl := range ttls {
						key := fmt.Sprintf("k%d-%d", i, j)
						l, err := c.TryLock(t.Context(), key, ttl)
						if err != nil {
							continue // refused as too short, or no quorum within validity
						}
						held++
						if bound := start.Add(ttl); l.Until().After(bound) {
							t.Errorf("ttl %v: Until %v, after start+ttl %v", ttl, l.Until(), bound)
						}
						if err := l.Extend(t.Context(), ttl); err == nil {
							if bound := fake.Now().Add(ttl); l.Until().After(bound) {
								t.Errorf("ttl %v: Until %v after Extend, after now+ttl %v", ttl, l.Until(), bound)
							}
						}
						_ = l.Unlock(t.Context())
					}
				})
			}
		}
	}
	if held == 0 {
		t.Fatal("no TryLock succeeded: the property was never checked")
	}
	t.Logf("%d holds checked", held)
}
