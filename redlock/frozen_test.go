package redlock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/redlock"
)

// frozenRig is n nodes whose clients wait for a frozen node as long as
// go-redis lets them: no ContextTimeoutEnabled, and a ReadTimeout far longer
// than any test bound.
func frozenRig(t *testing.T, n int) *rig {
	t.Helper()
	r := newRig(t, n)
	for i, p := range r.procs {
		c := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, ReadTimeout: time.Minute})
		t.Cleanup(func() { _ = c.Close() })
		r.clients[i] = c
	}
	return r
}

// Close returns within about the node timeout, even with a call stuck on a
// frozen node that go-redis would hold for its whole ReadTimeout.
func TestCloseBoundedWithFrozenNode(t *testing.T) {
	r := frozenRig(t, 3)
	const nodeTimeout = 200 * time.Millisecond
	c, err := redlock.New(r.clients, redlock.WithNodeTimeout(nodeTimeout))
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.TryLock(t.Context(), "k", 10*time.Second) // every node's pool has a connection now
	if err != nil {
		t.Fatal(err)
	}
	if err := r.procs[2].Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.procs[2].Resume() })
	if err := l.Unlock(t.Context()); err != nil { // a quorum answers; node 2's release is stuck
		t.Fatal(err)
	}
	start := time.Now()
	_ = c.Close()
	// Close may wait out the stuck call's deadline and the calls queued
	// behind it: a few node timeouts. The frozen call itself is held for a
	// minute.
	if took := time.Since(start); took > 5*nodeTimeout {
		t.Fatalf("Close took %v with a %v node timeout", took, nodeTimeout)
	}
}

// A failed attempt against a frozen node costs about one node timeout: the
// node that timed out is released in the background, not waited on again.
func TestFailedAttemptWithFrozenNodeCostsOneTimeout(t *testing.T) {
	r := frozenRig(t, 3)
	const nodeTimeout = 400 * time.Millisecond
	c := r.client(t, redlock.WithNodeTimeout(nodeTimeout))
	if _, err := c.TryLock(t.Context(), "warm", 10*time.Second); err != nil { // connections and scripts in place
		t.Fatal(err)
	}
	if err := r.procs[1].Kill(); err != nil { // refuses connections at once
		t.Fatal(err)
	}
	if err := r.procs[2].Pause(); err != nil { // answers nothing
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.procs[2].Resume() })
	start := time.Now()
	_, err := c.TryLock(t.Context(), "k", 10*time.Second)
	took := time.Since(start)
	if !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("TryLock with one node down and one frozen: %v", err)
	}
	// One node timeout for the frozen node's answer, and the release of
	// node 0's grant (a healthy round trip); twice the timeout means the
	// frozen node was waited on a second time.
	if took > nodeTimeout*3/2 {
		t.Fatalf("failed attempt took %v with a %v node timeout", took, nodeTimeout)
	}
	if r.clients[0].Exists(t.Context(), "k").Val() != 0 {
		t.Fatal("node 0's grant was left behind")
	}
}

// A refused attempt does not wait out a frozen node's call: the refusals
// decide it, and the answers still out get about as long again as the
// others took, not the node timeout. Waiting it out cost every failed
// attempt of a waiter the node timeout while a node was down (measured: 50
// ms per refusal in the multi-client benchmark with one of five nodes
// killed, half the attempts failing there).
func TestRefusedAttemptDoesNotWaitForFrozenNode(t *testing.T) {
	r := newRig(t, 5)
	const nodeTimeout = 2 * time.Second // long: the attempt must not come near it
	c := r.client(t, redlock.WithNodeTimeout(nodeTimeout))
	if _, err := c.TryLock(t.Context(), "warm", 10*time.Second); err != nil { // connections and scripts in place
		t.Fatal(err)
	}
	for _, rc := range r.clients[:4] {
		if err := rc.Set(t.Context(), "k", "other-holder", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.procs[4].Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.procs[4].Resume() })
	start := time.Now()
	_, err := c.TryLock(t.Context(), "k", 10*time.Second)
	took := time.Since(start)
	if !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("TryLock against a holder: %v", err)
	}
	t.Logf("refused in %v with a %v node timeout", took, nodeTimeout)
	if took > nodeTimeout/4 {
		t.Fatalf("a refused attempt took %v: it waited for the frozen node (node timeout %v)", took, nodeTimeout)
	}
}
