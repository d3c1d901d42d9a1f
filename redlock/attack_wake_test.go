package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/clock"
	"github.com/fencedlock/fencedlock/redlock"
)

// A waiter whose last attempt was granted by nodes 3 and 4 and refused by
// the holder on 0, 1 and 2 knows 3 and 4 are free. When node 2 dies and the
// holder's Unlock announces the release on 0 and 1, the key is free on 4 of
// 5 nodes: the waiter must wake. (The waiter's backoff is on a fake clock
// that never moves: only the release can wake it.)
func TestAttackWakeWhenHolderNodeDies(t *testing.T) {
	r := newRig(t, 5)
	fake := clock.NewFake(epoch)
	c := r.client(t, redlock.WithClock(fake), redlock.WithRetry(fixedBackoff(time.Minute)))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for _, rc := range r.clients[:3] {
		if err := rc.Set(ctx, "k", "holder", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	got := make(chan error, 1)
	go func() {
		l, err := c.Lock(ctx, "k", 10*time.Second)
		if err == nil {
			err = l.Unlock(ctx)
		}
		got <- err
	}()
	if err := fake.BlockUntilContext(ctx, 1); err != nil { // refused, asleep
		t.Fatal(err)
	}
	waitSubscribed(t, r.clients, "fencedlock:released:k")
	if err := r.procs[2].Kill(); err != nil {
		t.Fatal(err)
	}
	r.releaseByHand(t, 0, "k", "holder")
	r.releaseByHand(t, 1, "k", "holder")
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter slept on though the key is free on 4 of 5 nodes and the holder's release was announced on every live node it held")
	}
}
