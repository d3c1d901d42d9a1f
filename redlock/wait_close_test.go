package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fencedlock/fencedlock/clock"
	"github.com/fencedlock/fencedlock/redlock"
)

// A wait that ends — its ctx, or Close — returns promptly, leaks nothing,
// leaves no grant behind, and gives up its place on the nodes.

// pauseWrites holds every write (scripts and PUBLISH too) on every node
// until unpause; reads go on.
func pauseWrites(t *testing.T, r *rig) (unpause func()) {
	t.Helper()
	for i, rc := range r.clients {
		if err := rc.Do(t.Context(), "CLIENT", "PAUSE", 60000, "WRITE").Err(); err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
	}
	done := false
	unpause = func() {
		if done {
			return
		}
		done = true
		for i, rc := range r.clients {
			if err := rc.Do(context.Background(), "CLIENT", "UNPAUSE").Err(); err != nil {
				t.Errorf("node %d: %v", i, err)
			}
		}
	}
	t.Cleanup(unpause)
	return unpause
}

// awaitBlockedScript waits until every node holds a script call back
// (under pauseWrites).
func awaitBlockedScript(ctx context.Context, t *testing.T, r *rig) {
	t.Helper()
	for i, rc := range r.clients {
		for {
			list, err := rc.ClientList(ctx).Result()
			if err != nil {
				t.Fatalf("node %d: %v", i, err)
			}
			found := false
			for line := range strings.Lines(list) {
				if strings.Contains(line, "cmd=evalsha") || strings.Contains(line, "cmd=eval ") {
					for f := range strings.FieldsSeq(line) {
						if flags, ok := strings.CutPrefix(f, "flags="); ok && strings.Contains(flags, "b") {
							found = true
						}
					}
				}
			}
			if found {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("node %d: no script held back: %v", i, ctx.Err())
			case <-time.After(time.Millisecond): // polling the node's client list
			}
		}
	}
}

// Close while waiters sleep on keys another Client holds, on a key this
// Client holds (its Unlock wakes the waiter) and on a free key, and every
// other round while they still arrive: every waiter returns, and no
// goroutine of the Client outlives Close.
func TestCloseWhileWaiting(t *testing.T) {
	r := newRig(t, 3)
	for i := range 5 {
		before := goleak.IgnoreCurrent()
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		other := r.client(t)
		k := func(s string) string { return fmt.Sprintf("close-waiting-%d-%s", i, s) }
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
		_ = mine.Unlock(ctx) // wakes the waiter on it, if it waits yet
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

// A Lock that Close ends gives up (ErrNotAcquired), as one whose ctx ends
// does, and a waiter that gives up withdraws its place on the nodes (the
// doc of Lock): the next waiter, of another process, is not held up for
// the closed one's lease (its backoff, here an hour).
func TestCloseWhileWaitingWithdraws(t *testing.T) {
	r := newRig(t, 3)
	nt := roomyNodeTimeout(measureRTT(t, r.clients))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	r.holdByHand(t, "k", "holder")
	closed := r.client(t, redlock.WithNodeTimeout(nt), redlock.WithRetry(fixedBackoff(time.Hour)))
	next := r.client(t, redlock.WithNodeTimeout(nt), redlock.WithRetry(fixedBackoff(time.Hour)))
	closedID, nextID := clientID(t, closed), clientID(t, next)
	gone := startLock(ctx, closed, "k", time.Minute)
	r.awaitWaiting(t, "k", closedID)
	since, _, _ := strings.Cut(r.waiting(t, 0, "k")[0], " ")
	eventually(t, time.Now().Add(time.Second), "a later millisecond", func() bool {
		return fmt.Sprint(time.Now().UnixMilli()) > since // same length: compares as numbers
	})
	got := startLock(ctx, next, "k", time.Minute)
	r.awaitWaiting(t, "k", closedID, nextID)

	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	if res := <-gone; !errors.Is(res.err, redlock.ErrNotAcquired) {
		t.Fatalf("a Lock that Close ended: %v, want ErrNotAcquired", res.err)
	}
	released := time.Now()
	for i := range r.clients {
		r.releaseByHand(t, i, "k") // as release.lua: it names the first waiter
	}
	select {
	case res := <-got:
		if res.err != nil {
			t.Fatal(res.err)
		}
		t.Logf("the next waiter took the key %v after the release", res.at.Sub(released))
		_ = res.l.Unlock(ctx)
	case <-time.After(20 * nt):
		t.Errorf("the next waiter still waits %v after the release: the closed Client's place is still first on the nodes (%v), for its lease (an hour)",
			20*nt, r.waiting(t, 0, "k"))
	}
}

// A Lock whose ctx ends while its head is woken again and again (a flood
// of announcements that free the key, on a key that stays held: each one
// is a try, refused) returns about when its ctx ends.
func TestCtxEndWhileWokenByForgedReleases(t *testing.T) {
	r := newRig(t, 3)
	const key = "stagger"
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
			_ = announceTo(ctx, r.clients[n%len(r.clients)], key, "")
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

// Close while the head's try is on the wire (held back on every node):
// the head returns with the client closed; its try then lands and is
// granted (the head was first), and that grant, which nobody owns, must be
// released, though Close stops the Client's batchers once nothing is in
// flight. A race: tried a number of times.
func TestCloseWhileTheHeadsTryIsOnTheWireLeavesNoHold(t *testing.T) {
	t.Parallel() // checks safety, not timing: runs beside the others of its kind
	r := newRig(t, 3)
	rtt := measureRTT(t, r.clients)
	nodeTimeout := max(2*time.Second, 200*rtt) // the try waits out the pause within it
	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
	defer cancel()
	got := 0
	defer func() { t.Logf("the head got the key in %d tries", got) }()
	for try := range 20 {
		key := fmt.Sprintf("close-on-the-wire-%d", try)
		fake := clock.NewFake(epoch)
		a := separateClients(t, r, 1, nodeTimeout, redlock.WithClock(fake), redlock.WithRetry(fixedBackoff(time.Hour)))[0]
		r.holdByHand(t, key, "holder")
		head := asleepOnFake(ctx, t, r, a, fake, key)
		r.dropByHand(t, key)
		unpause := pauseWrites(t, r)
		fake.Advance(time.Hour) // the head's backoff: it tries
		awaitBlockedScript(ctx, t, r)
		closed := make(chan struct{})
		go func() { _ = a.Close(); close(closed) }()
		res := <-head // returns at once: the client is closing
		if res.err != nil && !errors.Is(res.err, redlock.ErrNotAcquired) {
			t.Errorf("the head: %v", res.err)
		}
		unpause()
		<-closed
		if res.err == nil {
			got++
			_ = res.l.Unlock(ctx)
			continue // the head owns what it got
		}
		deadline := time.Now().Add(2 * nodeTimeout)
		for r.anyKey(t, key) > 0 {
			if time.Now().After(deadline) {
				for i, rc := range r.clients {
					v, _ := rc.Get(ctx, key).Result()
					t.Logf("node %d: %q, pttl %v", i, v, rc.PTTL(ctx, key).Val())
				}
				t.Fatalf("try %d: a hold nobody owns is left on %d nodes %v after Close returned",
					try, r.anyKey(t, key), 2*nodeTimeout)
			}
			time.Sleep(time.Millisecond) // polling the nodes, bounded
		}
	}
}
