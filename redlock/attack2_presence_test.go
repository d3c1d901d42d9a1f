package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/clock"
	"github.com/fencedlock/fencedlock/redlock"
)

// A process announced that it waits for the key, and died. The only
// process left hands the key from one goroutine to the next: its release
// is deferred for the dead peer's sake (wake), and its head must still
// wake — from the nodes' announcements of the release, or from the
// deferred wake — though its backoff (on a fake clock) never runs out.
func TestAttack2DeadPeersPresenceDoesNotStallHandoff(t *testing.T) {
	r := newRig(t, 3)
	fake := clock.NewFake(epoch)
	c := r.client(t, redlock.WithClock(fake), redlock.WithRetry(fixedBackoff(time.Minute)))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	const key = "dead-peer"
	channel := "fencedlock:released:" + key
	held, err := c.Lock(ctx, key, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		l, err := c.Lock(ctx, key, 10*time.Second)
		if err == nil {
			err = l.Unlock(ctx)
		}
		got <- err
	}()
	if err := fake.BlockUntilContext(ctx, 1); err != nil { // refused, asleep
		t.Fatal(err)
	}
	waitSubscribed(t, r.clients, channel)
	for _, rc := range r.clients { // the peer's last words
		if err := rc.Publish(ctx, channel, "?deadbeef").Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the local head was never woken after its own process's release")
	}
}
