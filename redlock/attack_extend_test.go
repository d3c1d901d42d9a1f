package redlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/clock"
	"github.com/fencedlock/fencedlock/redlock"
)

// Whatever Extend returns, Until() is never later than what a quorum of
// nodes may still hold. These are the failure paths other than a ctx that
// ends: the PEXPIREs were sent, so a shorter TTL may have landed.

// Extend to a shorter TTL whose answers time out on a majority returns
// ErrOutcomeUnknown; the PEXPIREs landed all the same, and the key is free for
// another client once the short TTL runs out.
func TestAttackExtendTimedOutKeepsUntilHonest(t *testing.T) {
	r := newRig(t, 3)
	gate := newReplyGate(t, "extend.lua")
	for _, rc := range r.clients[1:] { // nodes 1 and 2: their answers come late
		rc.AddHook(gate)
	}
	nt := roomyNodeTimeout(measureRTT(t, r.clients))
	c := r.client(t, redlock.WithNodeTimeout(nt))
	t.Cleanup(gate.release) // before the client's Close
	ctx := t.Context()

	l, err := c.TryLock(ctx, "k", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	short := 4 * nt
	gate.arm()
	sent := time.Now()
	err = l.Extend(ctx, short)
	if !errors.Is(err, redlock.ErrOutcomeUnknown) || errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("Extend: %v, want ErrOutcomeUnknown (its answers timed out on a majority: nothing said the hold is gone)", err)
	}
	for i, rc := range r.clients {
		if pttl := rc.PTTL(ctx, "k").Val(); pttl > short {
			t.Fatalf("node %d: PTTL %v: the PEXPIRE did not land, the test proves nothing", i, pttl)
		}
	}
	if until, limit := l.Until(), sent.Add(short); until.After(limit) {
		t.Fatalf("Until() is %v after the failed Extend's start, but every node drops the key %v after it",
			until.Sub(sent), short)
	}
}

// Extend whose quorum answers only after the new validity has run out
// returns ErrLockLost; the short TTL is on every node, so Until() must not
// stay at the old, later end.
func TestAttackExtendWithoutValidityKeepsUntilHonest(t *testing.T) {
	r := newRig(t, 3)
	gate := newReplyGate(t, "extend.lua")
	for _, rc := range r.clients {
		rc.AddHook(gate)
	}
	fake := clock.NewFake(epoch)
	c := r.client(t, redlock.WithClock(fake), redlock.WithNodeTimeout(10*time.Second))
	t.Cleanup(gate.release)
	ctx := t.Context()

	l, err := c.TryLock(ctx, "k", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	const short = 300 * time.Millisecond
	gate.arm()
	sent := fake.Now()
	errc := make(chan error, 1)
	go func() { errc <- l.Extend(context.WithoutCancel(ctx), short) }()
	for range len(r.clients) {
		<-gate.held // every node applied the PEXPIRE; its answer is held
	}
	fake.Advance(short) // the answers take longer than the new validity
	gate.release()
	if err := <-errc; !errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("Extend: %v, want ErrLockLost (no validity left)", err)
	}
	if until, limit := l.Until(), sent.Add(short); until.After(limit) {
		t.Fatalf("Until() is %v after the failed Extend's start, but every node drops the key %v after it",
			until.Sub(sent), short)
	}
}
