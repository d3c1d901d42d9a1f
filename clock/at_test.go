package clock_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/clock"
)

// stepOnArm is a Fake that moves step forward each time a timer is armed
// through NewTimer, before arming it: what happens when a test advances the
// clock between the code's reading of the time and its arming of a timer.
type stepOnArm struct {
	*clock.Fake
	step time.Duration
}

func (s stepOnArm) NewTimer(d time.Duration) clock.Timer {
	s.Advance(s.step)
	return s.Fake.NewTimer(d)
}

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
// caller's reading and the arming. A timer armed for a duration from the
// reading fires late by the move; one armed for the instant does not.
func TestNewTimerAtIgnoresAMoveBeforeArming(t *testing.T) {
	f := clock.NewFake(epoch)
	due := epoch.Add(10 * time.Second)
	late := stepOnArm{Fake: f, step: 4 * time.Second}
	relative := late.NewTimer(due.Sub(epoch)) // read at epoch, armed at epoch+4s
	f.Set(due)
	if _, fired := received(relative.C()); fired {
		t.Fatal("the relative timer fired on time: the test does not show the window")
	}
	g := clock.NewFake(epoch)
	moving := stepOnArm{Fake: g, step: 4 * time.Second}
	g.Advance(4 * time.Second) // the move, made before the arming as above
	tm := clock.NewTimerAt(moving, due)
	g.Set(due)
	if _, fired := received(tm.C()); !fired {
		t.Fatal("the timer armed for the instant did not fire when the clock reached it")
	}
}

// armRecorder is a Fake that records the base instant each NewTimerAt is
// armed for, so a test can move the base exactly there.
type armRecorder struct {
	*clock.Fake
	armed []time.Time
}

func (a *armRecorder) NewTimerAt(t time.Time) clock.Timer {
	a.armed = append(a.armed, t)
	return a.Fake.NewTimerAt(t)
}

// TestNewTimerAtOnASkewedClockFiresNotBeforeTheInstant: a timer armed on a
// Skewed clock for the instant at fires only once that clock reads at. The
// base clock is moved to the base instant the timer was armed for (and no
// further); when the timer fires there, the skewed reading must be at or
// past at. A reading short of it makes a loop that waits for at (the
// scheduler) arm a timer for the same base instant, which fires at once:
// it spins until the base moves again, for ever on a Fake.
func TestNewTimerAtOnASkewedClockFiresNotBeforeTheInstant(t *testing.T) {
	const year = 365 * 24 * time.Hour
	for _, tc := range []struct {
		name   string
		rate   float64
		offset time.Duration
		waits  []time.Duration // from the skewed now; -n is n years
	}{
		{"rate 0.7, milliseconds", 0.7, 0, msRange(1, 1000)},
		{"rate 0.7, negative offset", 0.7, -time.Hour, msRange(1, 1000)},
		{"rate 2, past the Duration range", 2, 0, []time.Duration{-400}}, // -n: n years on
		{"rate 0.5, base wait past the Duration range", 0.5, 0, []time.Duration{200 * year}},
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
