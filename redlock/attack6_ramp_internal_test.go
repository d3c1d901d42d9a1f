package redlock

import (
	"context"
	"testing"
	"time"
)

// The ramp doubles, all of it, and it stops at presentEvery: checked on
// eight announcements, which the test of the change (six, its first and
// fifth gap only) does not: it passes when only the first gap is short
// (presentGap set to 0 at the first announcement: gaps 16, 250, 250 ms...)
// and when the gap keeps doubling past presentEvery (500 ms, 1 s, 2 s:
// past sharedFor, when the others forget the process). Bounds are loose
// (load delays timers, never advances them).
func TestAttack6RampDoublesAndStopsAtPresentEvery(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, heard, lcancel, done := watchPresence(t, ctx, "attack6-ramp", time.Hour)
	at := announcements(t, ctx, heard, lcancel, done, 8)
	gaps(t, at)
	// The ramp's four gaps: presentFirst*(1+2+4+8) = 15/16 presentEvery.
	if ramp := at[4].Sub(at[0]); ramp >= 2*presentEvery {
		t.Errorf("the ramp's four gaps took %v, want about %v", ramp, presentFirst*15)
	}
	// Then every presentEvery: neither a storm nor gaps growing on.
	if steady := at[7].Sub(at[5]); steady < presentEvery*3/2 || steady >= 3*presentEvery {
		t.Errorf("the 6th to 8th announcements took %v, want about %v", steady, 2*presentEvery)
	}
}

// Close while the ramp's first short timer is armed: the presenter stops,
// Lock returns, and the package's goleak (TestMain) finds nothing left.
func TestAttack6CloseDuringRamp(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, heard, lcancel, done := watchPresence(t, ctx, "attack6-close", time.Hour)
	defer lcancel()
	select {
	case <-heard:
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Fatal("Lock succeeded on a held key")
	}
	c.waiters.mu.Lock()
	defer c.waiters.mu.Unlock()
	for k, q := range c.waiters.queues {
		if q.presenter != nil {
			t.Errorf("queue %q: presenter still armed after Close", k)
		}
	}
}
