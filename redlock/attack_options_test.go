package redlock_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/redlock"
)

// Option and ttl extremes: the largest ttl and node timeout a Duration
// holds. Locks work, and Close still lets the releases in flight land (a
// bound computed as twice the node timeout must not overflow into "none").
func TestAttackExtremeDurations(t *testing.T) {
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
func TestAttackCloseBoundDoesNotOverflow(t *testing.T) {
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
