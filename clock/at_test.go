package clock_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/clock"
)

// plainClock hides every method but Clock's, so NewTimerAt takes its
// fallback.
type plainClock struct{ clock.Clock }

func TestNewTimerAt(t *testing.T) {
	for _, tc := range []struct {
		name string
		// clk returns the clock under test, on f.
		clk func(f *clock.Fake) clock.Clock
	}{
		{"fake", func(f *clock.Fake) clock.Clock { return f }},
		{"skewed fake", func(f *clock.Fake) clock.Clock { return clock.NewSkewed(f, time.Hour, 2) }},
		{"skewed slow fake", func(f *clock.Fake) clock.Clock { return clock.NewSkewed(f, -time.Minute, 0.5) }},
		{"fallback", func(f *clock.Fake) clock.Clock { return plainClock{f} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := clock.NewFake(epoch)
			c := tc.clk(f)
			at := c.Now().Add(10 * time.Second)
			tm := clock.NewTimerAt(c, at)
			for c.Now().Before(at) {
				if _, fired := received(tm.C()); fired {
					t.Fatalf("fired at %v, before %v", c.Now(), at)
				}
				f.Advance(time.Second)
			}
			if _, fired := received(tm.C()); !fired {
				t.Fatalf("not fired at %v, due %v", c.Now(), at)
			}
			if _, fired := received(clock.NewTimerAt(c, c.Now().Add(-time.Second)).C()); !fired {
				t.Fatal("a timer for a past instant did not fire at once")
			}
		})
	}
}

// TestNewTimerAtIgnoresAMoveBeforeArming: the clock moves between the
// caller's reading and the arming (BeforeArm). A timer armed for a duration
// from the reading fires late by the move; one armed for the instant on a
// Fake does not.
func TestNewTimerAtIgnoresAMoveBeforeArming(t *testing.T) {
	for _, tc := range []struct {
		name   string
		arm    func(c clock.Clock, due time.Time, read time.Time) clock.Timer
		onTime bool
	}{
		{"for the time left", func(c clock.Clock, due, read time.Time) clock.Timer { return c.NewTimer(due.Sub(read)) }, false},
		{"for the instant", func(c clock.Clock, due, _ time.Time) clock.Timer { return clock.NewTimerAt(c, due) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := clock.NewFake(epoch)
			due := epoch.Add(10 * time.Second)
			read := f.Now()
			f.BeforeArm(func() { f.BeforeArm(nil); f.Advance(4 * time.Second) })
			tm := tc.arm(f, due, read)
			f.Set(due)
			if _, fired := received(tm.C()); fired != tc.onTime {
				t.Fatalf("fired when the clock reached the instant: %v, want %v", fired, tc.onTime)
			}
		})
	}
}

// armRecorder is a Fake that records the base instant each timer is
// armed for, so a test can move the base exactly there.
type armRecorder struct {
	*clock.Fake
	armed []time.Time
}

func (a *armRecorder) NewTimer(d time.Duration) clock.Timer {
	a.armed = append(a.armed, a.Now().Add(d))
	return a.Fake.NewTimer(d)
}

func (a *armRecorder) NewTimerAt(t time.Time) clock.Timer {
	a.armed = append(a.armed, t)
	return a.Fake.NewTimerAt(t)
}

// TestNewTimerAtOnASkewedClockFiresNotBeforeTheInstant: a timer armed on a
// Skewed clock for the instant at fires only once that clock reads at (a
// Skewed clock is no AtClock: the time left, rounded up to base time). The
// base clock is moved to the base instant the timer was armed for (and no
// further); when the timer fires there, the skewed reading must be at or
// past at. A reading short of it makes a loop that waits for at (the
// scheduler) arm a timer for the same base instant, which fires at once:
// it spins until the base moves again, for ever on a Fake.
func TestNewTimerAtOnASkewedClockFiresNotBeforeTheInstant(t *testing.T) {
	for _, tc := range []struct {
		name   string
		rate   float64
		offset time.Duration
		waits  []time.Duration // from the skewed now; -n is n years
	}{
		{"rate 0.7, milliseconds", 0.7, 0, msRange(1, 1000)},
		{"rate 0.7, negative offset", 0.7, -time.Hour, msRange(1, 1000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			early := 0
			var first string
			for _, d := range tc.waits {
				base := &armRecorder{Fake: clock.NewFake(epoch)}
				c := clock.NewSkewed(base, tc.offset, tc.rate)
				at := c.Now().Add(d)
				if d < 0 { // beyond what a Duration from now can say
					at = c.Now().AddDate(int(-d), 0, 0)
				}
				tm := clock.NewTimerAt(c, at)
				if len(base.armed) != 1 {
					t.Fatalf("the skewed clock armed %d base timers, want 1", len(base.armed))
				}
				base.Set(base.armed[0])
				if _, fired := received(tm.C()); fired && c.Now().Before(at) {
					early++
					if first == "" {
						first = fmt.Sprintf("armed for %v: fired with the skewed clock at %v, %v short", at, c.Now(), at.Sub(c.Now()))
					}
				}
			}
			if early > 0 {
				t.Fatalf("%d of %d timers fired before their instant; first: %s", early, len(tc.waits), first)
			}
		})
	}
}

// msRange is every whole millisecond from lo to hi.
func msRange(lo, hi int) []time.Duration {
	var ds []time.Duration
	for ms := lo; ms <= hi; ms++ {
		ds = append(ds, time.Duration(ms)*time.Millisecond)
	}
	return ds
}
