package redlock_test

import (
	"context"
	"errors"
	"sort"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/clock"
	"github.com/fencedlock/fencedlock/redlock"
)

// An Extend whose ctx ends after its PEXPIREs reached the nodes must not
// leave Until() later than what the nodes keep: the shorter TTL landed, and
// another client may take the key once it runs out.
func TestExtendCancelledAfterSendingKeepsUntilHonest(t *testing.T) {
	r := newRig(t, 3)
	gate := newReplyGate(t, "extend.lua")
	for _, rc := range r.clients {
		rc.AddHook(gate)
	}
	c := r.client(t, redlock.WithNodeTimeout(10*time.Second))
	t.Cleanup(gate.release) // before the client's Close, which runs first

	l, err := c.TryLock(t.Context(), "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	gate.arm()
	ctx, cancel := context.WithCancel(t.Context())
	const short = 300 * time.Millisecond
	sent := time.Now()
	errc := make(chan error, 1)
	go func() { errc <- l.Extend(ctx, short) }()
	for range len(r.clients) {
		<-gate.held // every node applied the PEXPIRE; its reply is held
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Extend: %v, want context.Canceled", err)
	}
	if until, limit := l.Until(), sent.Add(short); until.After(limit) {
		t.Fatalf("Until() is %v after the cancelled Extend's start, but the nodes drop the key %v after it",
			until.Sub(sent), short)
	}
	for i, rc := range r.clients {
		if pttl := rc.PTTL(t.Context(), "k").Val(); pttl > short {
			t.Fatalf("node %d: PTTL %v: the PEXPIRE did not land, the test proves nothing", i, pttl)
		}
	}
	gate.release()
}

// Whatever Extend returns, Until() is never later than what a quorum of
// nodes may still hold. These are the failure paths other than a ctx that
// ends: the PEXPIREs were sent, so a shorter TTL may have landed.

// Extend to a shorter TTL whose answers time out on a majority returns
// ErrOutcomeUnknown; the PEXPIREs landed all the same, and the key is free for
// another client once the short TTL runs out.
func TestExtendTimedOutKeepsUntilHonest(t *testing.T) {
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
func TestExtendWithoutValidityKeepsUntilHonest(t *testing.T) {
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

// Concurrent Extends of one handle with different TTLs (a watchdog and a
// user, say) must leave Until() no later than what a quorum of nodes keeps.
func TestConcurrentExtendsKeepUntilHonest(t *testing.T) {
	r := newRig(t, 3)
	c := r.client(t, redlock.WithNodeTimeout(5*time.Second))
	ctx := t.Context()
	l, err := c.TryLock(ctx, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	const long, short = 10 * time.Second, 2 * time.Second
	for i := range 100 {
		errs := make(chan error, 2)
		first, second := long, short
		if i%2 == 1 {
			first, second = short, long
		}
		go func() { errs <- l.Extend(ctx, first) }()
		go func() { errs <- l.Extend(ctx, second) }()
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatalf("iteration %d: %v", i, err)
			}
		}
		// Every Extend answered by a quorum. Each node's expiry is at most
		// its PTTL after the moment the PTTL call returned (the server read
		// it before), plus the millisecond PTTL truncates.
		expiries := make([]time.Time, len(r.clients))
		for j, rc := range r.clients {
			pttl := rc.PTTL(ctx, "k").Val()
			expiries[j] = time.Now().Add(pttl + time.Millisecond)
		}
		sort.Slice(expiries, func(a, b int) bool { return expiries[a].After(expiries[b]) })
		kept := expiries[c.Quorum()-1] // a quorum keeps the key at least until this
		if until := l.Until(); until.After(kept) {
			t.Fatalf("iteration %d: Until() is %v after the time by which a quorum drops the key",
				i, until.Sub(kept))
		}
	}
}

// TestExtendOnFrozenNodesIsOutcomeUnknown: a user's Extend whose nodes
// time out (2 of 3 frozen: their keys still hold the value) does not know
// whether the hold is gone. docs/using.md's error table and ErrOutcomeUnknown's
// doc say so: "Extend/Unlock were sent, but ctx ended or nodes failed
// before a quorum answered". The hold is on all 3 nodes with validity
// left, so Done must stay open and the error must not be ErrLockLost.
func TestExtendOnFrozenNodesIsOutcomeUnknown(t *testing.T) {
	r := newRig(t, 3)
	fake := clock.NewFake(epoch)
	c := r.client(t, redlock.WithClock(fake))
	ctx := t.Context()
	l, err := c.TryLock(ctx, "k", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	r.settled(t, "k", l.Value())
	for _, p := range r.procs[1:] {
		if err := p.Pause(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, p := range r.procs[1:] {
			_ = p.Resume()
		}
	})
	err = l.Extend(ctx, time.Minute)
	for _, p := range r.procs[1:] {
		if err := p.Resume(); err != nil {
			t.Fatal(err)
		}
	}
	if n := r.holders(t, "k", l.Value()); n < c.Quorum() {
		t.Fatalf("the hold is on %d nodes, want a quorum (it was never released)", n)
	}
	if errors.Is(err, redlock.ErrLockLost) || !errors.Is(err, redlock.ErrOutcomeUnknown) {
		t.Errorf("Extend with 2 of 3 nodes frozen: %v; want ErrOutcomeUnknown, not ErrLockLost (the hold is on all 3 nodes)", err)
	}
	select {
	case <-l.Done():
		t.Errorf("Done closed on node errors alone, with %v of validity left and the hold on a quorum", l.TTL())
	default:
	}
}
