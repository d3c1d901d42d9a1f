package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/clock"
	"github.com/fencedlock/fencedlock/redlock"
)

// waitGone waits until key exists on no node (it expired), polling the
// nodes, bounded.
func waitGone(ctx context.Context, t *testing.T, r *rig, key string) {
	t.Helper()
	for r.anyKey(t, key) > 0 {
		select {
		case <-ctx.Done():
			t.Fatalf("key %q still on %d nodes: %v", key, r.anyKey(t, key), ctx.Err())
		case <-time.After(time.Millisecond): // polling the nodes
		}
	}
}

// A hold whose grants were announced on every node and which then ended
// without a release — it expired: its process died, or never unlocked —
// must not make a waiter let later holds pass for ever. Here another
// process then takes the key and releases it, announced on every node: the
// key is free, so the waiter must ask and get it. (Its backoff is on a fake
// clock that never moves: only a wake-up can get it the key.)
func TestAttack2ExpiredAnnouncedHoldDoesNotBlockWaiter(t *testing.T) {
	r := newRig(t, 3)
	fake := clock.NewFake(epoch)
	w := r.client(t, redlock.WithClock(fake), redlock.WithRetry(fixedBackoff(time.Minute)))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	const key = "stale"
	r.holdByHand(t, key, "first-holder")
	got := make(chan error, 1)
	go func() {
		l, err := w.Lock(ctx, key, 10*time.Second)
		if err == nil {
			err = l.Unlock(ctx)
		}
		got <- err
	}()
	if err := fake.BlockUntilContext(ctx, 1); err != nil { // refused, asleep
		t.Fatal(err)
	}
	waitSubscribed(t, r.clients, "fencedlock:released:"+key)

	// The first hold expires unannounced; another process takes the key
	// (its grants announced on every node) and never releases it: it
	// expires too.
	for _, rc := range r.clients {
		if err := rc.Del(ctx, key).Err(); err != nil {
			t.Fatal(err)
		}
	}
	crashed := r.client(t)
	if _, err := crashed.TryLock(ctx, key, 500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	waitGone(ctx, t, r, key)

	// A third process takes the key and releases it, both announced.
	other := r.client(t)
	l, err := other.Lock(ctx, key, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter sleeps on though the key is free and its last release was announced on every node: " +
			"it lets a hold pass that expired long ago")
	}
}
