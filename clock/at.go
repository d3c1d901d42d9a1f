package clock

import "time"

// AtClock is a [Clock] that can also arm a timer for an instant of its own
// time. A loop that reads the time, decides when it must wake, and then arms
// a timer for the difference wakes late by however far the clock moved
// between the reading and the arming: by microseconds on the system clock,
// but by a whole step when a test advances a [Fake] in that window (the
// timer then waits for a time the test may never reach). Arming for the
// instant itself leaves no such window.
type AtClock interface {
	Clock
	// NewTimerAt returns a timer that fires once this clock reads t or
	// later; at once when it does already.
	NewTimerAt(t time.Time) Timer
}

// NewTimerAt returns a timer that fires when c reads t: c's own NewTimerAt
// when c is an [AtClock], else c.NewTimer(t.Sub(c.Now())) — on a clock that
// moves continuously, as the system clock does, the two differ by the time
// between the reading and the arming.
func NewTimerAt(c Clock, t time.Time) Timer {
	if at, ok := c.(AtClock); ok {
		return at.NewTimerAt(t)
	}
	return c.NewTimer(t.Sub(c.Now()))
}

var (
	_ AtClock = (*Fake)(nil)
	_ AtClock = (*skewed)(nil)
)

// NewTimerAt returns a timer that fires when the fake time reaches t (at
// once if it has).
func (f *Fake) NewTimerAt(t time.Time) Timer {
	tm := &fakeTimer{f: f, c: make(chan time.Time, 1)}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armLocked(tm, t.Sub(f.now))
	return tm
}

// NewTimerAt fires when the skewed time reaches t. Skewed time is a
// function of base time, so the instant is converted to base time and armed
// there: at the base's instant when the base is an AtClock, so that a Fake
// base advanced meanwhile does not delay it.
func (s *skewed) NewTimerAt(t time.Time) Timer {
	// Skewed time origin+offset+e·rate is t when base time is origin+e.
	e := s.toBase(t.Sub(s.origin.Add(s.offset)))
	return &skewedTimer{s: s, t: NewTimerAt(s.base, s.origin.Add(e))}
}
