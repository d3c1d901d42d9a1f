package clock

import (
	"math"
	"time"
)

// NewTimerAt returns a timer that fires when c reads t. On a *Fake it is
// armed for that instant: a loop that reads the time, decides when it must
// wake and then arms a timer for the difference wakes late by however far
// the clock moved between the reading and the arming — by a whole step when
// a test advances the Fake in that window, and the timer then waits for a
// time the test may never reach; so on a Skewed clock, at the base instant
// where it reads t. On any other clock (the system clock, a type of the
// caller's, even one that embeds a Fake and reads it its own way) it is
// c.NewTimer(t.Sub(c.Now())): such clocks move
// continuously, and the two differ by the time between the reading and the
// arming.
func NewTimerAt(c Clock, t time.Time) Timer {
	switch c := c.(type) {
	case *Fake:
		return c.NewTimerAt(t)
	case *skewed:
		return c.newTimerAt(t)
	}
	return c.NewTimer(t.Sub(c.Now()))
}

// newTimerAt fires when the skewed clock reads t: at the first base instant
// whose reading (Now's own arithmetic) is t or later, armed on the base
// through NewTimerAt, so that a Fake base moved meanwhile does not delay it.
func (s *skewed) newTimerAt(t time.Time) Timer {
	want := t.Sub(s.origin.Add(s.offset)) // the skewed elapsed time to reach
	e := s.toBase(want)
	if e != math.MaxInt64 && e != math.MinInt64 {
		for i := 0; i < 64 && s.read(e) < want; i++ {
			e++
		}
	}
	return &skewedTimer{s: s, t: NewTimerAt(s.base, s.origin.Add(e))}
}

// NewTimerAt returns a timer that fires when the fake time reaches t (at
// once if it has).
func (f *Fake) NewTimerAt(t time.Time) Timer {
	f.arming()
	tm := &fakeTimer{f: f, c: make(chan time.Time, 1)}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armLocked(tm, t.Sub(f.now))
	return tm
}
