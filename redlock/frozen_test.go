package redlock_test

import (
	"context"
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

// A caller whose ctx ends gets its answer at once: an attempt that waits on
// a frozen node must not hold its caller until that node's timeout once the
// caller's ctx has ended. Its grants are released in the background.
func TestCtxEndReturnsPromptlyWithFrozenNode(t *testing.T) {
	for _, call := range []string{"TryLock", "Lock"} {
		t.Run(call, func(t *testing.T) {
			r := newRig(t, 3)
			rtt := measureRTT(t, r.clients)
			const nodeTimeout = 5 * time.Second
			c := r.client(t, redlock.WithNodeTimeout(nodeTimeout))
			// Someone else holds node 0; node 2 is frozen: the attempt has
			// node 1's grant and waits for node 2 (a grace of a quarter of
			// the node timeout) when the caller's ctx ends.
			if err := r.clients[0].Set(t.Context(), "k", smallValue, time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
			if err := r.procs[2].Pause(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = r.procs[2].Resume() })
			budget := roomyNodeTimeout(rtt)
			ctx, cancel := context.WithTimeout(t.Context(), budget)
			defer cancel()
			start := time.Now()
			var err error
			if call == "TryLock" {
				_, err = c.TryLock(ctx, "k", time.Minute)
			} else {
				_, err = c.Lock(ctx, "k", time.Minute)
			}
			over := time.Since(start) - budget
			if !errors.Is(err, redlock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("%s: %v, want ErrNotAcquired and DeadlineExceeded", call, err)
			}
			// Releasing node 1's grant is one round trip; give it many.
			if limit := budget; over > limit {
				t.Fatalf("%s returned %v after its ctx ended (node timeout %v); want within %v",
					call, over, nodeTimeout, limit)
			}
			t.Logf("%s returned %v after its ctx ended", call, over)
			// Node 2 is still frozen: ask node 0 alone (a GET on node 2
			// would wait out go-redis's read timeout).
			if v, err := r.clients[0].Get(t.Context(), "k").Result(); err != nil || v != smallValue {
				t.Fatalf("the other holder's key is gone from node 0: %q, %v", v, err)
			}
			eventually(t, time.Now().Add(nodeTimeout), "node 1 released", func() bool {
				return r.clients[1].Exists(t.Context(), "k").Val() == 0
			})
		})
	}
}
