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

// Option and ttl extremes: the largest ttl and node timeout a Duration
// holds. Locks work, and Close still lets the releases in flight land (a
// bound computed as twice the node timeout must not overflow into "none").
func TestLocksWithTheLargestTTLAndNodeTimeout(t *testing.T) {
	r := newRig(t, 3)
	c, err := redlock.New(r.clients, redlock.WithNodeTimeout(math.MaxInt64))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	l, err := c.TryLock(ctx, "k", math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	if l.TTL() < 100*365*24*time.Hour {
		t.Fatalf("TTL() %v for the largest ttl", l.TTL())
	}
	if err := l.Extend(ctx, math.MaxInt64); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		l, err := c.TryLock(ctx, "k2", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil { // decides at a quorum
			t.Fatal(err)
		}
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	_ = c.Close() // the last releases are still on the wire
	for _, k := range []string{"k", "k2"} {
		if n := r.anyKey(t, k); n != 0 {
			t.Fatalf("key %s left on %d nodes after Close", k, n)
		}
	}
	if _, err := c.TryLock(context.Background(), "k", time.Minute); err == nil {
		t.Fatal("TryLock after Close succeeded")
	}
}

// With the largest node timeout, Close waits for a release on the wire (its
// bound, twice the node timeout, must not overflow into no wait at all).
func TestCloseBoundDoesNotOverflow(t *testing.T) {
	r := newRig(t, 3)
	rtt := measureRTT(t, r.clients)
	gate := newReplyGate(t, "release.lua")
	r.clients[2].AddHook(gate)
	c, err := redlock.New(r.clients, redlock.WithNodeTimeout(math.MaxInt64))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	t.Cleanup(gate.release)
	ctx := t.Context()
	l, err := c.TryLock(ctx, "k", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	gate.arm()
	// Bounded here, since the node timeout is not: a hang is a failure.
	uctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := l.Unlock(uctx); err != nil { // decides at nodes 0 and 1
		t.Fatal(err)
	}
	<-gate.held // node 2's release is on the wire
	closed := make(chan struct{})
	go func() {
		_ = c.Close()
		close(closed)
	}()
	select {
	case <-closed:
		t.Fatal("Close returned while a release was on the wire, long before its node timeout")
	case <-time.After(roomyNodeTimeout(rtt)): // a window for the wrong answer to show
	}
	gate.release()
	<-closed
}
