package clock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/clock"
)

var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// received returns the value waiting on c, if any, without blocking.
func received(c <-chan time.Time) (time.Time, bool) {
	select {
	case v := <-c:
		return v, true
	default:
		return time.Time{}, false
	}
}

func TestFakeMovesOnlyWhenTold(t *testing.T) {
	f := clock.NewFake(epoch)
	if got := f.Now(); !got.Equal(epoch) {
		t.Fatalf("Now = %v, want %v", got, epoch)
	}
	f.Advance(1500 * time.Millisecond)
	if got := f.Since(epoch); got != 1500*time.Millisecond {
		t.Fatalf("Since after Advance = %v, want 1.5s", got)
	}
	f.Set(epoch.Add(-time.Hour))
	if got := f.Now(); !got.Equal(epoch.Add(-time.Hour)) {
		t.Fatalf("Now after Set back = %v", got)
	}
}

func TestFakeTimerFiresExactlyWhenDue(t *testing.T) {
	for _, tc := range []struct {
		name string
		move func(f *clock.Fake, d time.Duration)
	}{
		{"Advance", func(f *clock.Fake, d time.Duration) { f.Advance(d) }},
		{"Set", func(f *clock.Fake, d time.Duration) { f.Set(f.Now().Add(d)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := clock.NewFake(epoch)
			tm := f.NewTimer(10 * time.Second)
			if f.Timers() != 1 {
				t.Fatalf("Timers = %d, want 1", f.Timers())
			}
			tc.move(f, 10*time.Second-time.Nanosecond)
			if _, ok := received(tm.C()); ok {
				t.Fatal("timer fired 1ns before it was due")
			}
			tc.move(f, time.Nanosecond)
			v, ok := received(tm.C())
			if !ok {
				t.Fatal("timer did not fire when due")
			}
			if want := epoch.Add(10 * time.Second); !v.Equal(want) {
				t.Fatalf("timer delivered %v, want %v", v, want)
			}
			if f.Timers() != 0 {
				t.Fatalf("Timers after firing = %d, want 0", f.Timers())
			}
			tc.move(f, time.Hour)
			if _, ok := received(tm.C()); ok {
				t.Fatal("one-shot timer fired twice")
			}
		})
	}
}

func TestFakeTimerFiresOnceForALargeJump(t *testing.T) {
	f := clock.NewFake(epoch)
	a, b := f.NewTimer(time.Second), f.NewTimer(time.Minute)
	f.Advance(time.Hour)
	for name, tm := range map[string]clock.Timer{"1s": a, "1m": b} {
		if _, ok := received(tm.C()); !ok {
			t.Errorf("%s timer did not fire on a jump past it", name)
		}
		if _, ok := received(tm.C()); ok {
			t.Errorf("%s timer delivered two values", name)
		}
	}
}

func TestFakeSetBackwardsDoesNotFire(t *testing.T) {
	f := clock.NewFake(epoch)
	tm := f.NewTimer(time.Minute)
	f.Set(epoch.Add(-time.Hour))
	if _, ok := received(tm.C()); ok {
		t.Fatal("timer fired when the clock was set back")
	}
	if f.Timers() != 1 {
		t.Fatalf("Timers = %d, want 1 (still armed)", f.Timers())
	}
	// The deadline is absolute: it is still epoch+1m.
	f.Set(epoch.Add(time.Minute - time.Nanosecond))
	if _, ok := received(tm.C()); ok {
		t.Fatal("timer fired before its deadline")
	}
	f.Set(epoch.Add(time.Minute))
	if _, ok := received(tm.C()); !ok {
		t.Fatal("timer did not fire at its deadline")
	}
}

func TestFakeTimerZeroOrNegativeFiresAtOnce(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		f := clock.NewFake(epoch)
		tm := f.NewTimer(d)
		v, ok := received(tm.C())
		if !ok || !v.Equal(epoch) {
			t.Errorf("NewTimer(%v): got (%v, %v), want the current time at once", d, v, ok)
		}
		if f.Timers() != 0 {
			t.Errorf("NewTimer(%v) left %d armed timers", d, f.Timers())
		}
	}
}

func TestFakeStopAndReset(t *testing.T) {
	for _, tc := range []struct {
		name      string
		run       func(f *clock.Fake, tm clock.Timer) bool // returns Stop's or Reset's result
		want      bool
		wantArmed int
		// after the call, moving the clock this far must (not) fire the timer
		advance   time.Duration
		wantFired bool
	}{
		{"stop active", func(f *clock.Fake, tm clock.Timer) bool { return tm.Stop() }, true, 0, time.Hour, false},
		{"stop twice", func(f *clock.Fake, tm clock.Timer) bool { tm.Stop(); return tm.Stop() }, false, 0, time.Hour, false},
		{"stop after receive", func(f *clock.Fake, tm clock.Timer) bool {
			f.Advance(time.Second)
			<-tm.C()
			return tm.Stop()
		}, false, 0, time.Hour, false},
		{"stop fired but unread", func(f *clock.Fake, tm clock.Timer) bool {
			f.Advance(time.Second)
			return tm.Stop()
		}, true, 0, time.Hour, false},
		{"reset active moves deadline", func(f *clock.Fake, tm clock.Timer) bool {
			return tm.Reset(2 * time.Second)
		}, true, 1, 2 * time.Second, true},
		{"reset active not yet due", func(f *clock.Fake, tm clock.Timer) bool {
			return tm.Reset(2 * time.Second)
		}, true, 1, 2*time.Second - 1, false},
		{"reset stopped", func(f *clock.Fake, tm clock.Timer) bool {
			tm.Stop()
			return tm.Reset(time.Second)
		}, false, 1, time.Second, true},
		{"reset fired but unread drops stale value", func(f *clock.Fake, tm clock.Timer) bool {
			f.Advance(time.Second)
			return tm.Reset(time.Minute)
		}, true, 1, time.Second, false},
		{"reset after receive", func(f *clock.Fake, tm clock.Timer) bool {
			f.Advance(time.Second)
			<-tm.C()
			return tm.Reset(time.Second)
		}, false, 1, time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := clock.NewFake(epoch)
			tm := f.NewTimer(time.Second)
			if got := tc.run(f, tm); got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			if f.Timers() != tc.wantArmed {
				t.Fatalf("Timers = %d, want %d", f.Timers(), tc.wantArmed)
			}
			if _, ok := received(tm.C()); ok {
				t.Fatal("a stale value was received right after the call")
			}
			f.Advance(tc.advance)
			if _, ok := received(tm.C()); ok != tc.wantFired {
				t.Fatalf("fired after %v: %v, want %v", tc.advance, ok, tc.wantFired)
			}
		})
	}
}

func TestFakeBlockUntilContext(t *testing.T) {
	t.Run("returns when n timers are armed", func(t *testing.T) {
		f := clock.NewFake(epoch)
		f.NewTimer(time.Hour)
		go func() {
			f.NewTimer(time.Minute)
			f.NewTimer(time.Second)
		}()
		if err := f.BlockUntilContext(t.Context(), 3); err != nil {
			t.Fatal(err)
		}
		if f.Timers() < 3 {
			t.Fatalf("Timers = %d after BlockUntilContext(3)", f.Timers())
		}
	})
	t.Run("already armed", func(t *testing.T) {
		f := clock.NewFake(epoch)
		f.NewTimer(time.Hour)
		if err := f.BlockUntilContext(t.Context(), 1); err != nil {
			t.Fatal(err)
		}
		if err := f.BlockUntilContext(t.Context(), 0); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("ctx ends", func(t *testing.T) {
		f := clock.NewFake(epoch)
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() { errc <- f.BlockUntilContext(ctx, 1) }()
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		// The abandoned waiter must not be woken later (it would close a
		// channel nobody reads, harmless) nor stop new waiters from working.
		f.NewTimer(time.Hour)
		if err := f.BlockUntilContext(t.Context(), 1); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("deadline", func(t *testing.T) {
		f := clock.NewFake(epoch)
		ctx, cancel := context.WithDeadline(t.Context(), time.Unix(0, 0)) // already past
		defer cancel()
		if err := f.BlockUntilContext(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want context.DeadlineExceeded", err)
		}
	})
}

func TestFakeSleep(t *testing.T) {
	t.Run("returns after Advance", func(t *testing.T) {
		f := clock.NewFake(epoch)
		errc := make(chan error, 1)
		go func() { errc <- f.Sleep(t.Context(), 5*time.Second) }()
		if err := f.BlockUntilContext(t.Context(), 1); err != nil {
			t.Fatal(err)
		}
		f.Advance(4 * time.Second)
		select {
		case err := <-errc:
			t.Fatalf("Sleep(5s) returned %v after 4s", err)
		default:
		}
		f.Advance(time.Second)
		if err := <-errc; err != nil {
			t.Fatalf("Sleep = %v, want nil", err)
		}
		if f.Timers() != 0 {
			t.Fatalf("Sleep left %d timers armed", f.Timers())
		}
	})
	t.Run("ctx cancelled while sleeping", func(t *testing.T) {
		f := clock.NewFake(epoch)
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() { errc <- f.Sleep(ctx, time.Hour) }()
		if err := f.BlockUntilContext(t.Context(), 1); err != nil {
			t.Fatal(err)
		}
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("Sleep = %v, want context.Canceled", err)
		}
		if f.Timers() != 0 {
			t.Fatalf("cancelled Sleep left %d timers armed", f.Timers())
		}
	})
	t.Run("ctx already done", func(t *testing.T) {
		f := clock.NewFake(epoch)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := f.Sleep(ctx, 0); !errors.Is(err, context.Canceled) {
			t.Fatalf("Sleep = %v, want context.Canceled", err)
		}
	})
	t.Run("non-positive returns at once", func(t *testing.T) {
		f := clock.NewFake(epoch)
		if err := f.Sleep(t.Context(), 0); err != nil {
			t.Fatal(err)
		}
		if err := f.Sleep(t.Context(), -time.Second); err != nil {
			t.Fatal(err)
		}
	})
}

// TestFakeConcurrentUse is for the race detector: many sleepers, one mover.
func TestFakeConcurrentUse(t *testing.T) {
	const n = 50
	f := clock.NewFake(epoch)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			errs <- f.Sleep(t.Context(), time.Duration(i+1)*time.Millisecond)
		})
	}
	if err := f.BlockUntilContext(t.Context(), n); err != nil {
		t.Fatal(err)
	}
	for range n {
		f.Advance(time.Millisecond)
		_ = f.Now()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}
