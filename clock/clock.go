// Package clock is the time source of fencedlock's lock logic. What the
// lock decides by time — validity, backoff, the watchdog — reads a [Clock],
// so that tests drive it with a [Fake] and the chaos harness can give a
// client a clock that is off ([NewSkewed]). Network waits are not lock
// logic: per-node deadlines and the short waits for nodes to answer are real
// time (time.Now and contexts), because a node's answer does not come
// sooner when a fake clock is advanced.
//
// Real() is the system clock. NewFake returns a clock that moves only when
// told to. NewSkewed wraps a clock with an offset and a rate.
package clock

import (
	"context"
	"time"
)

// PassiveClock reads the time.
type PassiveClock interface {
	Now() time.Time
	Since(t time.Time) time.Duration
}

// Clock reads the time and waits on it.
type Clock interface {
	PassiveClock
	// NewTimer returns a timer that fires once after d on this clock.
	NewTimer(d time.Duration) Timer
	// Sleep waits d on this clock, or until ctx ends (returning ctx.Err()).
	Sleep(ctx context.Context, d time.Duration) error
}

// Timer is a one-shot timer, like *time.Timer.
type Timer interface {
	// C delivers the clock's time when the timer fires.
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it was active.
	Stop() bool
	// Reset re-arms the timer to fire after d; it reports whether it was active.
	Reset(d time.Duration) bool
}

// Real returns the system clock.
func Real() Clock { return realClock{} }

type realClock struct{}

var _ Clock = realClock{}

func (realClock) Now() time.Time                  { return time.Now() }
func (realClock) Since(t time.Time) time.Duration { return time.Since(t) }
func (realClock) NewTimer(d time.Duration) Timer  { return realTimer{time.NewTimer(d)} }
func (realClock) Sleep(ctx context.Context, d time.Duration) error {
	return sleep(ctx, realClock{}, d)
}

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }

// sleep waits on a timer of c: the one implementation of Sleep.
func sleep(ctx context.Context, c Clock, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d <= 0 {
		return nil
	}
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
