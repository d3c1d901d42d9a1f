package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fencedlock/fencedlock/redlock"
)

// Close while heads wait and announce themselves (a PUBLISH in the
// background every so often) and while a deferred local wake is armed:
// every waiter returns, and no goroutine of the Client outlives Close.
func TestAttack2CloseWhileHeadsPresent(t *testing.T) {
	r := newRig(t, 3)
	for i := range 5 {
		before := goleak.IgnoreCurrent()
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		// Another process's hold and waiter: this Client's heads see a peer.
		other := r.client(t)
		k := func(s string) string { return fmt.Sprintf("present-%d-%s", i, s) }
		held, err := other.Lock(ctx, k("held"), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c := r.client(t, redlock.WithRetry(fixedBackoff(5*time.Millisecond)))
		keys := []string{k("held"), k("mine"), k("free")}
		mine, err := c.Lock(ctx, keys[1], 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan error, len(keys))
		for _, k := range keys {
			go func() {
				_, err := c.Lock(ctx, k, 10*time.Second)
				got <- err
			}()
		}
		// The waiter on the free key takes it; the others wait and poll
		// every 5ms, each head announcing itself.
		_ = mine.Unlock(ctx) // wakes the waiter on it, at once or deferred
		// Every other round Close comes at once, while the waiters arrive.
		if i%2 == 1 {
			waitSubscribed(t, r.clients, "fencedlock:released:"+k("held"))
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		for range keys {
			if err := <-got; err != nil && !errors.Is(err, redlock.ErrNotAcquired) {
				t.Errorf("a waiter after Close: %v", err)
			}
		}
		_ = held.Unlock(ctx)
		if err := other.Close(); err != nil {
			t.Fatal(err)
		}
		cancel()
		goleak.VerifyNone(t, before)

	}
}

// A Lock whose ctx ends while its head is woken again and again by
// forged releases (and told of hundreds of contending processes, which
// makes its spread long) returns about when its ctx ends.
func TestAttack2CtxEndsWhileStaggering(t *testing.T) {
	r := newRig(t, 3)
	const key = "stagger"
	channel := "fencedlock:released:" + key
	r.holdByHand(t, key, "holder-of-stagger")
	c := r.client(t, redlock.WithRetry(fixedBackoff(time.Minute)))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	flood := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for n := 0; ; n++ {
			select {
			case <-flood:
				return
			default:
			}
			rc := r.clients[n%len(r.clients)]
			_ = rc.Publish(ctx, channel, "?peer"+string(rune('a'+n%26))+string(rune('a'+n/26%26))+"xxxxx").Err()
			_ = rc.Publish(ctx, channel, "holder-of-stagger").Err() // a forged release
		}
	}()
	defer func() { close(flood); <-done }()
	budget := 300 * time.Millisecond
	lctx, lcancel := context.WithTimeout(ctx, budget)
	defer lcancel()
	start := time.Now()
	_, err := c.Lock(lctx, key, 10*time.Second)
	took := time.Since(start)
	if !errors.Is(err, redlock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock on a held key: %v, want ErrNotAcquired and the deadline", err)
	}
	// An attempt in flight returns at once when ctx ends; allow a node
	// timeout for a loaded machine.
	if late := took - budget; late > max(250*time.Millisecond, 100*r.rtt) {
		t.Errorf("Lock returned %v after its ctx ended", late)
	}
}
