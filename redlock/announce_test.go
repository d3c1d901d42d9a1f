package redlock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/redlock"
)

// waitSets waits until the nodes ran n SET commands in all, inside scripts
// too: one per node an acquire asked.
func waitSets(ctx context.Context, t *testing.T, r *rig, n int64) {
	t.Helper()
	for {
		got := setCalls(t, r)
		if got == n {
			return
		}
		if got > n {
			t.Fatalf("%d SETs on the nodes, want %d", got, n)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d SETs on the nodes, want %d: %v", got, n, ctx.Err())
		case <-time.After(time.Millisecond): // polling the nodes' counters
		}
	}
}

// A head that a release woke lets another process's hold pass when a
// quorum of nodes announced granting it (the acquire script publishes "+"
// and the value), instead of asking every node only to be refused. It asks
// once that hold's release is announced, and gets the key. Counted on the
// nodes: the waiter asks twice before it sleeps (once as a newcomer, once
// when subscribed), then once more, after the second release; asking at the
// first release too would make it three times.
func TestWokenHeadLetsAnAnnouncedHoldPass(t *testing.T) {
	r := newRig(t, 5)
	for i, c := range r.clients {
		if err := c.ConfigResetStat(t.Context()).Err(); err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
	}
	const key = "announced"
	channel := "fencedlock:released:" + key
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	watch := make([]*redis.PubSub, len(r.clients))
	for i, c := range r.clients {
		watch[i] = c.Subscribe(ctx, channel)
		t.Cleanup(func() { _ = watch[i].Close() })
		if _, err := watch[i].Receive(ctx); err != nil { // the confirmation
			t.Fatal(err)
		}
	}
	// Another process holds the key, value H.
	r.holdByHand(t, key, "other-process-H")
	sets := int64(len(r.clients))

	c := r.client(t, redlock.WithRetry(fixedBackoff(time.Hour)))
	type result struct {
		l   *redlock.Lock
		err error
	}
	done := make(chan result, 1)
	go func() {
		l, err := c.Lock(ctx, key, time.Minute)
		done <- result{l, err}
	}()
	// Two refused asks of every node, then the waiter sleeps, subscribed
	// (the subscription came before the second ask), and says it waits.
	sets += 2 * int64(len(r.clients))
	waitSets(ctx, t, r, sets)
	present := make(chan string, 1)
	for _, w := range watch {
		go func() {
			for m := range w.Channel() {
				if strings.HasPrefix(m.Payload, "?") {
					select {
					case present <- m.Payload:
					default:
					}
				}
			}
		}()
	}
	select {
	case p := <-present:
		t.Logf("the waiter announced itself: %q", p)
	case <-ctx.Done():
		t.Fatal("a waiting head did not announce itself")
	}

	// Process X takes the key as H goes: X's grants are announced on a
	// quorum, then H's release.
	x := "other-process-X"
	for i, rc := range r.clients {
		if err := rc.Set(ctx, key, x, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		sets++
		if i < 3 {
			if err := rc.Publish(ctx, channel, "+"+x).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range 3 {
		if err := r.clients[i].Publish(ctx, channel, "other-process-H").Err(); err != nil {
			t.Fatal(err)
		}
	}
	// X releases: now the waiter asks, and gets the key (free on every
	// node before the first announcement, so no node refuses and none is
	// healed: each SET is an ask).
	for _, rc := range r.clients {
		if err := rc.Del(ctx, key).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, rc := range r.clients {
		if err := rc.Publish(ctx, channel, x).Err(); err != nil {
			t.Fatal(err)
		}
	}
	var res result
	select {
	case res = <-done:
	case <-ctx.Done():
		t.Fatal("the waiter did not take the key after X's release")
	}
	if res.err != nil {
		t.Fatal(res.err)
	}
	defer func() { _ = res.l.Unlock(context.Background()) }()
	sets += int64(len(r.clients))
	// Lock returns at a quorum: let the last asks land before counting.
	for i, rc := range r.clients {
		for rc.Get(ctx, key).Val() != res.l.Value() {
			select {
			case <-ctx.Done():
				t.Fatalf("node %d never granted the waiter's last ask: %v", i, ctx.Err())
			case <-time.After(time.Millisecond): // polling the node
			}
		}
	}
	if got := setCalls(t, r); got != sets {
		t.Errorf("%d SETs on the nodes, want %d: the waiter asked when H's release woke it, though X had been granted a quorum", got, sets)
	}
}
