package clock_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/fencedlock/fencedlock/clock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRealReadsSystemTime(t *testing.T) {
	c := clock.Real()
	before := time.Now()
	now := c.Now()
	after := time.Now()
	if now.Before(before) || now.After(after) {
		t.Fatalf("Real().Now() = %v, want between %v and %v", now, before, after)
	}
	if d := c.Since(before); d < 0 {
		t.Fatalf("Real().Since(earlier) = %v, want >= 0", d)
	}
}

func TestRealTimerAndSleep(t *testing.T) {
	c := clock.Real()
	tm := c.NewTimer(time.Millisecond)
	select {
	case <-tm.C():
	case <-time.After(10 * time.Second): // a bound on a broken timer, not a synchronisation
		t.Fatal("Real timer did not fire")
	}
	if tm.Stop() {
		t.Fatal("Stop after the value was received reported active")
	}
	if err := c.Sleep(t.Context(), time.Millisecond); err != nil {
		t.Fatalf("Sleep: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := c.Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep with a cancelled ctx = %v, want context.Canceled", err)
	}
}

// timerScript drives one timer through Stop and Reset and reports what it
// saw, so that the Fake can be held against time.Timer (run in a synctest
// bubble, where time.Timer uses a fake time of the runtime's own).
func timerScript(c clock.Clock, advance func(time.Duration)) []string {
	var log []string
	note := func(what string, v bool) {
		if v {
			log = append(log, what+"=true")
		} else {
			log = append(log, what+"=false")
		}
	}
	ready := func(tm clock.Timer) bool {
		select {
		case <-tm.C():
			return true
		default:
			return false
		}
	}

	tm := c.NewTimer(10 * time.Second)
	advance(5 * time.Second)
	note("fired-early", ready(tm))
	note("stop-active", tm.Stop())
	advance(10 * time.Second)
	note("fired-after-stop", ready(tm))
	note("reset-stopped", tm.Reset(time.Second))
	advance(2 * time.Second)
	note("reset-stopped-fired", ready(tm))
	note("stop-after-receive", tm.Stop())

	// Fired but not received: Stop discards the value and reports true.
	tm = c.NewTimer(time.Second)
	advance(2 * time.Second)
	note("stop-unread", tm.Stop())
	note("stale-after-stop", ready(tm))

	// Fired but not received: Reset discards the value, re-arms, reports true.
	tm = c.NewTimer(time.Second)
	advance(2 * time.Second)
	note("reset-unread", tm.Reset(3*time.Second))
	note("stale-after-reset", ready(tm))
	advance(2 * time.Second)
	note("fired-before-new-deadline", ready(tm))
	advance(2 * time.Second)
	note("fired-at-new-deadline", ready(tm))

	// Reset of an active timer moves its deadline.
	tm = c.NewTimer(time.Second)
	note("reset-active", tm.Reset(5*time.Second))
	advance(2 * time.Second)
	note("fired-at-old-deadline", ready(tm))
	advance(4 * time.Second)
	note("fired-at-moved-deadline", ready(tm))
	return log
}

func TestFakeTimerMatchesTimeTimer(t *testing.T) {
	var want []string
	synctest.Test(t, func(t *testing.T) {
		want = timerScript(clock.Real(), time.Sleep)
	})
	f := clock.NewFake(time.Unix(1000, 0))
	got := timerScript(f, f.Advance)
	if len(got) != len(want) {
		t.Fatalf("fake: %v\nreal: %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("step %d: fake %s, time.Timer %s", i, got[i], want[i])
		}
	}
}
