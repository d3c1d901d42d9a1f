package clock

import (
	"context"
	"math"
	"time"
)

// NewSkewed returns a clock that reads base shifted by offset and running at
// rate times base's speed (rate 1 = same speed, 2 = twice as fast; rate ≤ 0
// counts as 1, and so does a rate that is not a finite number). Time is scaled
// from the moment NewSkewed is called, and read within the Duration range of
// that moment (about 292 years of base time, less at a rate above 1). It models a client whose clock is off
// or drifts; timers wait on the skewed scale and never fire before d of
// skewed time has passed. A timer's channel delivers the base clock's reading.
func NewSkewed(base Clock, offset time.Duration, rate float64) Clock {
	if !(rate > 0) || math.IsInf(rate, 0) {
		rate = 1
	}
	return &skewed{base: base, origin: base.Now(), offset: offset, rate: rate}
}

type skewed struct {
	base   Clock
	origin time.Time
	offset time.Duration
	rate   float64
}

var _ Clock = (*skewed)(nil)

func (s *skewed) Now() time.Time {
	return s.origin.Add(s.offset + s.read(s.base.Since(s.origin)))
}

// read is the skewed time elapsed when the base's is elapsed.
func (s *skewed) read(elapsed time.Duration) time.Duration {
	return time.Duration(float64(elapsed) * s.rate)
}

func (s *skewed) Since(t time.Time) time.Duration { return s.Now().Sub(t) }

// NewTimer fires after d of skewed time, i.e. d/rate of base time.
func (s *skewed) NewTimer(d time.Duration) Timer {
	return &skewedTimer{s: s, t: s.base.NewTimer(s.baseWait(d))}
}

// baseWait is how long the base must move for this clock's reading to
// have moved d: d/rate rounded up, and then as many nanoseconds more as the
// reading's own rounding (Now truncates elapsed·rate) needs, so that a
// timer never fires with the reading short of its instant.
func (s *skewed) baseWait(d time.Duration) time.Duration {
	e := s.toBase(d)
	if d <= 0 || e <= 0 || e == math.MaxInt64 {
		return e
	}
	from := s.base.Since(s.origin)
	want := s.read(from) + d
	for i := 0; i < 64 && s.read(from+e) < want; i++ {
		e++
	}
	return e
}

func (s *skewed) Sleep(ctx context.Context, d time.Duration) error { return sleep(ctx, s, d) }

// toBase converts a skewed duration to base time, rounding up: rounding down
// would let a timer fire before d of skewed time has passed (and a loop that
// sleeps until a deadline on a Fake base would then spin without end).
func (s *skewed) toBase(d time.Duration) time.Duration {
	b := math.Ceil(float64(d) / s.rate)
	switch { // a slow rate can take a long wait past the Duration range
	case b >= math.MaxInt64:
		return math.MaxInt64
	case b <= math.MinInt64:
		return math.MinInt64
	}
	return time.Duration(b)
}

type skewedTimer struct {
	s *skewed
	t Timer
}

func (t *skewedTimer) C() <-chan time.Time        { return t.t.C() }
func (t *skewedTimer) Stop() bool                 { return t.t.Stop() }
func (t *skewedTimer) Reset(d time.Duration) bool { return t.t.Reset(t.s.baseWait(d)) }
