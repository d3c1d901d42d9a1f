package redlock_test

import (
	"context"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/clock"
	"github.com/fencedlock/fencedlock/redlock"
)

// With the largest node timeout New accepts, the watchdog's deadline for an
// extension (twice the node timeout) must not wrap into one already past:
// the first extension then failed at once, and the hold ended a third of
// its TTL in, on healthy nodes.
func TestWatchdogWithTheLargestNodeTimeout(t *testing.T) {
	r := newRig(t, 3)
	fake := clock.NewFake(epoch)
	ev := events{extended: make(chan uint64, 10), lost: make(chan uint64, 10)}
	c := r.client(t, redlock.WithClock(fake), redlock.WithObserver(ev), redlock.WithNodeTimeout(math.MaxInt64))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // the node timeout bounds nothing here
	defer cancel()
	const ttl = 3 * time.Second
	l, err := c.TryLock(ctx, "k", ttl, redlock.AutoExtend())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Unlock(ctx) }()
	r.settled(t, "k", l.Value())
	done := l.Done()
	for round := range 3 {
		if err := fake.BlockUntilContext(ctx, 1); err != nil { // the Client's scheduler waits
			t.Fatal(err)
		}
		fake.Advance(ttl / 3)
		select {
		case <-ev.extended:
		case <-done:
			t.Fatalf("round %d: the hold ended instead of being extended", round)
		case <-ctx.Done():
			t.Fatalf("round %d: no extension", round)
		}
	}
}

// wrapMs is the PTTL, in ms, past which ms·1e6 ns wraps the uint64 range
// (2^64 ns is 18446744073709.551616 ms): a key that far away expires in
// about 584 years, which Redis accepts.
const wrapMs = 18446744073709

// A key held by hand with an expiry centuries away: its PTTL in ns is past
// the int64 range, which wrapped into a hint of about a minute, and the
// waiter retried then instead of after its hour of backoff. Saturated, the
// hint is longer than any backoff, which Lock then honours. The waiter's
// sleeps run on a fake clock (its only timers): advanced past the wrapped
// hint, a wrapped sleep fires and the waiter asks again.
func TestLockBehindAHoldCenturiesLong(t *testing.T) {
	r := newRig(t, 3)
	const wrapped = time.Minute // what the PTTL reads as, wrapped
	px := wrapMs + 1 + wrapped.Milliseconds()
	for _, rc := range r.clients {
		if err := rc.Do(t.Context(), "SET", "k", "by-hand", "PX", strconv.FormatInt(px, 10)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	fake := clock.NewFake(epoch)
	retry := &countingRetry{s: fixedBackoff(time.Hour), stop: math.MaxInt, cancel: cancel}
	c := r.client(t, redlock.WithClock(fake))
	got := make(chan error, 1)
	go func() {
		_, err := c.Lock(ctx, "k", time.Minute, redlock.WithLockRetry(retry))
		got <- err
	}()
	if err := fake.BlockUntilContext(ctx, 1); err != nil { // asleep after its first refusals
		t.Fatal(err)
	}
	before := retry.highest.Load()
	fake.Advance(2 * wrapped)
	// A sleep that fired is followed by an ask, its refusal and the next
	// sleep's timer; a sleep of an hour is still armed.
	if err := fake.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	after := retry.highest.Load()
	cancel()
	if err := <-got; err == nil {
		t.Fatal("acquired a key held by hand")
	}
	if after != before {
		t.Fatalf("retry %d after retry %d, %v later: the hint of a hold centuries long cut an hour of backoff short", after, before, 2*wrapped)
	}
}
