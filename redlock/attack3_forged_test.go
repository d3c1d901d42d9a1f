package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/internal/redistest"
	"github.com/fencedlock/fencedlock/redlock"
)

// A waiter whose backoff runs out does not ask while, by the announced
// grants, another process holds the key (letPass, then skip). The backoff
// is the net for a wake-up that never comes; with the skip, a grant
// announced on a quorum whose release is never heard — a pub/sub message
// lost (a subscription that reconnects drops what was published
// meanwhile), or a forged "+X 86400000" — keeps the waiter from asking on
// a free key until the waiter's own TTL has passed since the announcement,
// however short its backoff.
func TestAttack3UnheardReleaseStallsWaiterBeyondBackoff(t *testing.T) {
	r := newRig(t, 3)
	rtt := redistest.PingRTT(t, r.clients)
	backoff := max(20*time.Millisecond, 20*rtt)
	c := r.client(t, redlock.WithRetry(fixedBackoff(backoff)))
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	const key, ttl = "attack3-unheard", 30 * time.Second
	channel := "fencedlock:released:" + key
	seen := presences(ctx, t, r, key)
	r.holdByHand(t, key, "other-process-H")
	got := make(chan lockResult, 1)
	go func() {
		l, err := c.Lock(ctx, key, ttl)
		got <- lockResult{l, err}
	}()
	awaitPresence(ctx, t, seen, "", true) // the waiter is the head, subscribed, asleep
	// Another process X takes the key as H goes, its grants announced on
	// every node; then X's key is gone and its release is not heard.
	x := "other-process-X"
	for _, rc := range r.clients {
		if err := rc.Set(ctx, key, x, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rc.Publish(ctx, channel, "+"+x+" 60000").Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, rc := range r.clients {
		if err := rc.Del(ctx, key).Err(); err != nil {
			t.Fatal(err)
		}
	}
	free := time.Now()
	bound := 50 * backoff
	select {
	case res := <-got:
		if res.err != nil {
			t.Fatal(res.err)
		}
		t.Logf("the waiter took the free key after %v", time.Since(free))
		_ = res.l.Unlock(ctx)
	case <-time.After(bound):
		t.Errorf("the key is free on every node, the waiter's backoff is %v, and it has not asked in %v (it waits out its TTL, %v)",
			backoff, bound, ttl)
		cancel()
		<-got
	}
}
