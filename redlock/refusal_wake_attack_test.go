package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/clock"
	"github.com/fencedlock/fencedlock/redlock"
)

// A refusal whose entry replaces its own Client's older one (a waiter that
// left, its withdraw not arrived yet) changes the node's first waiter with
// the key free; acquire.lua announces it, as a withdraw does (see
// docs/protocol.md, Claim 5). These tests pin who is told and who is not.

// enterByHand puts member's entry in key's waiting set on every node, at
// wait start since, leased for an hour on the node's clock: a waiter that
// left and whose withdraw has not arrived yet, or another process's waiter.
func (r *rig) enterByHand(t *testing.T, key, member string, since time.Time) {
	t.Helper()
	order, leases := waitKeys(key)
	for i, rc := range r.clients {
		now, err := rc.Time(t.Context()).Result()
		if err != nil {
			t.Fatal(err)
		}
		if err := rc.ZAdd(t.Context(), order, redis.Z{Score: float64(since.UnixMilli()), Member: member}).Err(); err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		if err := rc.ZAdd(t.Context(), leases, redis.Z{Score: float64(now.Add(time.Hour).UnixMilli()), Member: member}).Err(); err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
	}
}

// TestARefusalThatMakesAnotherClientFirstWakesIt: the same departed entry
// of Client A (older than everyone), but A's next waiter is younger than
// B's, which waits on the nodes. The key is released: announced to A's
// departed entry, the first waiter; B hears nothing. A's new head asks
// before A's withdraw arrives: refused (the departed entry is first), its
// entry replaces the departed one, and B is now first on every node with
// the key free. A's head does not wake (B is first: right). But nobody
// tells B: the release was announced to A's departed entry, and A's
// withdraw, when it arrives, finds A's entry at another wait start and does
// nothing (withdraw.lua announces only what it removed). B sleeps out its
// hour with the key free and itself first on every node, and A's head
// behind it — unless the refusal, which changed the node's first waiter with
// the key free, announces it.
func TestARefusalThatMakesAnotherClientFirstWakesIt(t *testing.T) {
	r := newRig(t, 3)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	const key = "atk-strand"
	fakeA := clock.NewFake(epoch.Add(2 * time.Second))
	a := r.client(t, redlock.WithClock(fakeA), redlock.WithRetry(fixedBackoff(time.Hour)))
	idA := clientID(t, a)
	fakeB := clock.NewFake(epoch.Add(time.Second))
	b := r.client(t, redlock.WithClock(fakeB), redlock.WithRetry(fixedBackoff(time.Hour)))
	idB := clientID(t, b)

	// A's departed waiter, older than B's; another process holds the key.
	r.enterByHand(t, key, idA, epoch)
	r.holdByHand(t, key, "other")
	gotB := startLock(ctx, b, key, time.Minute)
	if err := fakeB.BlockUntilContext(ctx, 1); err != nil { // refused and asleep
		t.Fatal(err)
	}
	r.awaitWaiting(t, key, idA, idB)
	waitSubscribed(t, r.clients, "fencedlock:released:"+key) // B alone waits so far

	// The holder's release, announced to A's departed entry.
	for i := range r.clients {
		r.releaseByHand(t, i, key)
	}
	// A's next waiter asks before A's withdraw arrives.
	gotA := startLock(ctx, a, key, time.Minute)
	if err := fakeA.BlockUntilContext(ctx, 1); err != nil { // refused (B is first) and asleep
		t.Fatal(err)
	}
	// The waiting sets are not awaited here: told by A's refusals, B may
	// already hold the key, and have withdrawn its place from a node that
	// refused it (where A's departed entry was still first).

	res, ok := awaitLock(t, gotB, 10*time.Second)
	if !ok {
		sets := [][]string{r.waiting(t, 0, key), r.waiting(t, 1, key), r.waiting(t, 2, key)}
		free := r.anyKey(t, key) == 0
		cancel()
		<-gotB
		<-gotA
		t.Fatalf("B did not wake within 10s: the key free on every node %v, waiting sets %v", free, sets)
	}
	if res.err != nil {
		t.Fatalf("B: %v", res.err)
	}
	if err := res.l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// B's Unlock is announced to A's head, now first: it gets the key.
	resA, ok := awaitLock(t, gotA, 10*time.Second)
	if !ok {
		cancel()
		<-gotA
		t.Fatal("A did not get the key after B's Unlock")
	}
	if resA.err != nil {
		t.Fatalf("A: %v", resA.err)
	}
	if resA.l.Token() <= res.l.Token() {
		t.Errorf("A's token %d after B's %d", resA.l.Token(), res.l.Token())
	}
	if err := resA.l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestARefusalByAnotherClientsEntryDoesNotWakeTheHead pins the other side
// of the rule: a refusal with the key free where another Client's waiter
// is first (older), and stays first, announces nothing. Announced, it would
// wake the head at once, its next try refused the same way: a loop of
// tries with no sleep.
// Here the head asks twice (its try, and the look again of its fresh
// subscription) and then sleeps, however long one watches.
func TestARefusalByAnotherClientsEntryDoesNotWakeTheHead(t *testing.T) {
	r := newRig(t, 3)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	const key = "atk-no-loop"
	tries := &scriptCounter{sha: scriptSHA(t, "acquire.lua"), body: scriptBody(t, "acquire.lua")}
	fake := clock.NewFake(epoch)
	c, err := redlock.New(hookedNodes(t, r, tries), redlock.WithClock(fake), redlock.WithRetry(fixedBackoff(time.Hour)),
		redlock.WithNodeTimeout(max(250*time.Millisecond, 100*r.rtt)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	id := clientID(t, c)

	r.enterByHand(t, key, "0f0f0f0f", epoch.Add(-time.Second)) // another process's waiter, older; the key free
	before := tries.n.Load()
	got := startLock(ctx, c, key, time.Minute)
	if err := fake.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	r.awaitWaiting(t, key, "0f0f0f0f", id)
	if !absent(got, 300*time.Millisecond) {
		t.Fatal("Lock returned while another waiter is first on every node")
	}
	if n := (tries.n.Load() - before) / int64(len(r.clients)); n != 2 {
		t.Errorf("the head asked %d times, want 2 (its try and the look again after subscribing)", n)
	}
	cancel()
	if res := <-got; res.err == nil {
		t.Error("Lock succeeded past an older waiter")
	}
}
