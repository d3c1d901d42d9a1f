package clock_test

import (
	"math"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/clock"
)

func TestSkewedOffsetAndRate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		offset  time.Duration
		rate    float64
		advance time.Duration
		want    time.Duration // skewed Now - base start
	}{
		{"offset ahead", 30 * time.Second, 1, time.Second, 31 * time.Second},
		{"offset behind", -time.Minute, 1, time.Second, -59 * time.Second},
		{"twice as fast", 0, 2, time.Second, 2 * time.Second},
		{"half as fast", 0, 0.5, time.Second, 500 * time.Millisecond},
		{"offset and rate", time.Hour, 2, 3 * time.Second, time.Hour + 6*time.Second},
		{"zero rate counts as 1", 0, 0, time.Second, time.Second},
		{"negative rate counts as 1", 0, -3, time.Second, time.Second},
		{"NaN rate counts as 1", 0, math.NaN(), time.Second, time.Second},
		{"infinite rate counts as 1", 0, math.Inf(1), time.Second, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := clock.NewFake(epoch)
			s := clock.NewSkewed(f, tc.offset, tc.rate)
			if got := s.Now().Sub(epoch); got != tc.offset {
				t.Fatalf("at start: skew %v, want %v", got, tc.offset)
			}
			start := s.Now()
			f.Advance(tc.advance)
			if got := s.Now().Sub(epoch); got != tc.want {
				t.Fatalf("after %v of base time: %v, want %v", tc.advance, got, tc.want)
			}
			if got, want := s.Since(start), tc.want-tc.offset; got != want {
				t.Fatalf("Since = %v, want %v", got, want)
			}
		})
	}
}

func TestSkewedTimersScale(t *testing.T) {
	for _, tc := range []struct {
		name string
		rate float64
		d    time.Duration
		base time.Duration // base time after which the timer fires
	}{
		{"rate 2", 2, 2 * time.Second, time.Second},
		{"rate 0.5", 0.5, time.Second, 2 * time.Second},
		{"rate 1", 1, time.Second, time.Second},
		// 1ms/1.5 is not a whole number of nanoseconds: rounding down would
		// fire the timer 1ns of skewed time early.
		{"rate 1.5 rounds up", 1.5, time.Millisecond, 666667 * time.Nanosecond},
		{"rate 3 tiny", 3, 10 * time.Nanosecond, 4 * time.Nanosecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := clock.NewFake(epoch)
			s := clock.NewSkewed(f, 5*time.Second, tc.rate)
			start := s.Now()
			tm := s.NewTimer(tc.d)
			f.Advance(tc.base - time.Nanosecond)
			if _, ok := received(tm.C()); ok {
				t.Fatalf("fired after %v of base time, want %v", tc.base-time.Nanosecond, tc.base)
			}
			f.Advance(time.Nanosecond)
			if _, ok := received(tm.C()); !ok {
				t.Fatalf("did not fire after %v of base time", tc.base)
			}
			if got := s.Since(start); got < tc.d {
				t.Fatalf("fired when only %v of skewed time had passed, want >= %v", got, tc.d)
			}
		})
	}
}

func TestSkewedResetScales(t *testing.T) {
	f := clock.NewFake(epoch)
	s := clock.NewSkewed(f, 0, 2)
	tm := s.NewTimer(time.Hour)
	if !tm.Reset(4 * time.Second) {
		t.Fatal("Reset of an active timer reported inactive")
	}
	f.Advance(2*time.Second - time.Nanosecond)
	if _, ok := received(tm.C()); ok {
		t.Fatal("fired early after Reset")
	}
	f.Advance(time.Nanosecond)
	if _, ok := received(tm.C()); !ok {
		t.Fatal("did not fire 4s of skewed time after Reset")
	}
	if tm.Stop() {
		t.Fatal("Stop after the value was received reported active")
	}
}

func TestSkewedSleep(t *testing.T) {
	f := clock.NewFake(epoch)
	s := clock.NewSkewed(f, 0, 4)
	errc := make(chan error, 1)
	go func() { errc <- s.Sleep(t.Context(), 8*time.Second) }()
	if err := f.BlockUntilContext(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	f.Advance(2 * time.Second)
	if err := <-errc; err != nil {
		t.Fatalf("Sleep = %v", err)
	}
}
