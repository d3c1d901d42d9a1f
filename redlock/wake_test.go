package redlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/clock"
	"github.com/fencedlock/fencedlock/redlock"
)

// holdByHand makes key held on every node by value, as another process's
// hold would be.
func (r *rig) holdByHand(t *testing.T, key, value string) {
	t.Helper()
	for _, rc := range r.clients {
		if err := rc.Set(t.Context(), key, value, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// releaseByHand deletes key on node i and announces value's release there,
// as the release script does.
func (r *rig) releaseByHand(t *testing.T, i int, key, value string) {
	t.Helper()
	rc := r.clients[i]
	if err := rc.Del(t.Context(), key).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rc.Publish(t.Context(), "fencedlock:released:"+key, value).Err(); err != nil {
		t.Fatal(err)
	}
}

// A waiter hears releases of several values in any order — the holder's on
// two nodes, its own failed attempt's on a third in between — and must wake
// once the key is free on a quorum: here on every node.
func TestWaiterWakesOnReleasesOfMixedValues(t *testing.T) {
	r := newRig(t, 3)
	fake := clock.NewFake(epoch)
	// The backoff is on the fake clock, which the test never advances: only
	// a wake-up gets the waiter the lock.
	c := r.client(t, redlock.WithClock(fake), redlock.WithRetry(fixedBackoff(time.Minute)))
	r.holdByHand(t, "k", "holder")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	got := make(chan error, 1)
	go func() {
		l, err := c.Lock(ctx, "k", 10*time.Second)
		if err == nil {
			err = l.Unlock(ctx)
		}
		got <- err
	}()
	if err := fake.BlockUntilContext(ctx, 1); err != nil { // the waiter sleeps
		t.Fatal(err)
	}
	waitSubscribed(t, r.clients, "fencedlock:released:k")
	r.releaseByHand(t, 1, "k", "holder")
	r.releaseByHand(t, 0, "k", "own-failed-attempt")
	r.releaseByHand(t, 2, "k", "holder")
	if err := <-got; err != nil {
		t.Fatalf("waiter: %v (the key was free on every node and every release was announced)", err)
	}
}

// A Lock whose retry strategy allows no retry is one attempt, like TryLock,
// even while another goroutine of the same Client waits for the key.
func TestLockWithoutRetriesBehindLocalWaiter(t *testing.T) {
	for _, tc := range []struct {
		name  string
		retry redlock.RetryStrategy
	}{
		{"NoRetry", redlock.NoRetry()},
		{"LimitRetry 0", redlock.LimitRetry(fixedBackoff(time.Minute), 0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _, c, ctx, waiter := sleepingHead(t)
			// The holder's key vanishes without an announcement (it expired).
			for _, rc := range r.clients {
				rc.Del(ctx, "k")
			}
			l, err := c.Lock(ctx, "k", 10*time.Second, redlock.WithLockRetry(tc.retry))
			if err != nil {
				t.Fatalf("Lock with %s on a free key: %v", tc.name, err)
			}
			if err := l.Unlock(ctx); err != nil { // wakes the queued waiter
				t.Fatal(err)
			}
			if err := <-waiter; err != nil {
				t.Fatalf("queued waiter: %v", err)
			}
			// And on a held key it is one refusal, at once.
			r.holdByHand(t, "k", "holder")
			if _, err := c.Lock(ctx, "k", 10*time.Second, redlock.WithLockRetry(tc.retry)); !errors.Is(err, redlock.ErrNotAcquired) || ctx.Err() != nil {
				t.Fatalf("Lock with %s on a held key: %v (ctx %v)", tc.name, err, ctx.Err())
			}
		})
	}
}

// A queued Lock keeps its own retry strategy, whatever the head's: each
// of its tries is made when its backoff has passed (on the client's clock),
// and it gives up when the strategy does — here behind a head that sleeps a
// minute, after the holder's key vanished without an announcement.
func TestQueuedLockKeepsItsOwnRetryBudget(t *testing.T) {
	for _, tc := range []struct {
		name     string
		held     bool // the holder's key is still there
		wantLock bool
	}{
		{name: "free key: its try takes it", wantLock: true},
		{name: "held key: it gives up when its budget is spent", held: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, fake, c, ctx, head := sleepingHead(t)
			if !tc.held { // the holder's key vanishes without an announcement (it expired)
				for _, rc := range r.clients {
					rc.Del(ctx, "k")
				}
			}
			const tries = 2
			got := make(chan error, 1)
			go func() {
				l, err := c.Lock(ctx, "k", 10*time.Second,
					redlock.WithLockRetry(redlock.LimitRetry(fixedBackoff(10*time.Millisecond), tries)))
				if err == nil {
					err = l.Unlock(ctx)
				}
				got <- err
			}()
			// Its first try, then its retries, each when due: the Lock
			// returns after one of them, or sleeps its next backoff.
			for range tries + 2 {
				armed := make(chan error, 1)
				bctx, bcancel := context.WithTimeout(ctx, 5*time.Second)
				go func() { armed <- fake.BlockUntilContext(bctx, 2) }()
				var err error
				returned, waited := false, false
				select {
				case err = <-got:
					returned = true
				case aerr := <-armed:
					waited = true
					if aerr != nil {
						select {
						case err = <-got:
							returned = true
						default:
							bcancel()
							t.Fatalf("the queued Lock sleeps no backoff of its own: %v", aerr)
						}
					}
				}
				bcancel()
				if !waited {
					<-armed
				}
				if !returned {
					fake.Advance(10 * time.Millisecond)
					continue
				}
				if tc.wantLock && err != nil {
					t.Fatalf("queued Lock on a free key: %v", err)
				}
				if !tc.wantLock && (!errors.Is(err, redlock.ErrNotAcquired) || ctx.Err() != nil) {
					t.Fatalf("queued Lock on a held key: %v (ctx %v), want ErrNotAcquired once its budget is spent", err, ctx.Err())
				}
				if tc.held {
					for _, rc := range r.clients {
						rc.Del(ctx, "k")
					}
				}
				fake.Advance(time.Minute) // the head wakes, and takes the key
				if err := <-head; err != nil {
					t.Fatalf("head: %v", err)
				}
				return
			}
			t.Fatalf("the queued Lock made no try within its budget")
		})
	}
}

// sleepingHead is a Client on a fake clock whose default strategy waits a
// minute, and a Lock of "k" (held by hand) that sleeps that minute at the
// head of the Client's queue; its outcome (after its Unlock) comes on head.
func sleepingHead(t *testing.T) (r *rig, fake *clock.Fake, c *redlock.Client, ctx context.Context, head chan error) {
	t.Helper()
	r = newRig(t, 3)
	fake = clock.NewFake(epoch)
	c = r.client(t, redlock.WithClock(fake), redlock.WithRetry(fixedBackoff(time.Minute)))
	r.holdByHand(t, "k", "holder")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	head = make(chan error, 1)
	go func() {
		l, err := c.Lock(ctx, "k", 10*time.Second)
		if err == nil {
			err = l.Unlock(ctx)
		}
		head <- err
	}()
	if err := fake.BlockUntilContext(ctx, 1); err != nil { // queued and asleep
		t.Fatal(err)
	}
	return r, fake, c, ctx, head
}

// TestQueuedLockSleepsTwiceItsAttemptAfterARefusal: RetryStrategy's doc
// says "After a refusal it sleeps at least twice as long as that attempt
// took (unless a release wakes it)", on the client clock, where the head's
// loop applies it (acquire.go Lock: d = max(d, 2*took)). A Lock queued behind
// a local head retries with its own strategy but without that floor: with
// a zero backoff it asks the nodes again at once after each refusal, so
// many queued waiters hammer the nodes and take them from under a split
// vote's winner. Here the client clock never moves: a queued waiter with
// LimitRetry(0-backoff, 5) must still be sleeping after its first refusal.
func TestQueuedLockSleepsTwiceItsAttemptAfterARefusal(t *testing.T) {
	r := newRig(t, 3)
	fake := clock.NewFake(epoch)
	c := r.client(t, redlock.WithClock(fake))
	r.holdByHand(t, "k", "holder")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	go func() {
		_, _ = c.Lock(ctx, "k", 10*time.Second, redlock.WithLockRetry(fixedBackoff(time.Hour)))
	}()
	if err := fake.BlockUntilContext(ctx, 1); err != nil { // the head sleeps
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		l, err := c.Lock(ctx, "k", 10*time.Second, redlock.WithLockRetry(redlock.LimitRetry(fixedBackoff(0), 5)))
		if err == nil {
			_ = l.Unlock(ctx)
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("the queued waiter made its 6 tries with the client clock stopped (no sleep after a refusal) and returned %v", err)
	case <-time.After(2 * time.Second): // a bound: it should still be asleep
	}
}
