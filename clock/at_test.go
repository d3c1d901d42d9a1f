package clock_test

import (
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
