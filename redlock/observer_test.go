package redlock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/clock"
	"github.com/fencedlock/fencedlock/redlock"
)

// TestObserverHooks checks each Observer method against the calls that
// must cause it. Observer calls are synchronous on the lock's path, so the
// event of a call is there by the time the call returns; a node's error may
// come after a call that decided without it.
func TestObserverHooks(t *testing.T) {
	r := newRig(t, 5)
	nt := roomyNodeTimeout(measureRTT(t, r.clients))
	if err := r.procs[4].Kill(); err != nil {
		t.Fatal(err)
	}
	rec := newEventLog()
	c := r.client(t, redlock.WithObserver(rec), redlock.WithNodeTimeout(nt))
	ctx := t.Context()
	of := func(kind, key string, token uint64) func(event) bool {
		return func(e event) bool { return e.kind == kind && e.key == key && e.token == token }
	}

	start := time.Now()
	l, err := c.TryLock(ctx, "a", time.Minute)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if n := rec.count(of("acquired", "a", l.Token())); n != 1 {
		t.Fatalf("%d Acquired(a, %d) events after TryLock, want 1: %v", n, l.Token(), rec.all())
	}
	if e := rec.await(t, start, "acquired", isKind("acquired")); e.latency <= 0 || e.latency > took {
		t.Errorf("Acquired latency %v, want in (0, %v], the TryLock's own duration", e.latency, took)
	}

	ne := rec.await(t, start.Add(10*nt), "node 4's error", nodeErrorOf(4)).nodeErr
	if ne.Addr != r.procs[4].Addr() || ne.Err == nil {
		t.Errorf("NodeError %+v, want node 4 at %s with its error", ne, r.procs[4].Addr())
	}

	if err := l.Extend(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if n := rec.count(of("extended", "a", l.Token())); n != 1 {
		t.Errorf("%d Extended(a, %d) events after Extend, want 1", n, l.Token())
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if n := rec.count(of("released", "a", l.Token())); n != 1 {
		t.Errorf("%d Released(a, %d) events after Unlock, want 1", n, l.Token())
	}
	if n := rec.count(isKind("lost")); n != 0 {
		t.Errorf("%d Lost events for holds that were not lost: %v", n, rec.all())
	}

	// Lost: an Unlock that finds the hold taken over, and an extension of a
	// vanished key. Neither is a release or an extension.
	taken, err := c.TryLock(ctx, "b", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	vanished, err := c.TryLock(ctx, "c", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, rc := range r.clients[:4] {
		if err := rc.Set(ctx, "b", "someone-else", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rc.Del(ctx, "c").Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := taken.Unlock(ctx); !errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("Unlock of a taken-over key: %v, want ErrLockLost", err)
	}
	if err := vanished.Extend(ctx, time.Minute); !errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("Extend of a vanished key: %v, want ErrLockLost", err)
	}
	for _, h := range []*redlock.Lock{taken, vanished} {
		if n := rec.count(of("lost", h.Key(), h.Token())); n != 1 {
			t.Errorf("%d Lost(%s, %d) events, want 1: %v", n, h.Key(), h.Token(), rec.all())
		}
		if n := rec.count(of("released", h.Key(), h.Token())) + rec.count(of("extended", h.Key(), h.Token())); n != 0 {
			t.Errorf("%d Released or Extended events for the lost %s", n, h.Key())
		}
	}
}

// panicOnLost is an Observer whose Lost panics.
type panicOnLost struct{ redlock.NopObserver }

func (panicOnLost) Lost(string, uint64) { panic("observer: Lost") }

// TestCloseWithAPanickingObserverEndsEveryHold: Close ends every hold
// (Done closed) and stops its background work. An Observer whose Lost
// panics makes Close panic on its first hold; the others are never ended,
// and a second Close does nothing (its sync.Once is spent).
func TestCloseWithAPanickingObserverEndsEveryHold(t *testing.T) {
	r := newRig(t, 3)
	c := r.client(t, redlock.WithObserver(panicOnLost{}))
	ctx := t.Context()
	var dones []<-chan struct{}
	for _, k := range []string{"a", "b", "c"} {
		l, err := c.TryLock(ctx, k, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		dones = append(dones, l.Done())
	}
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Errorf("Close panicked: %v", p)
			}
		}()
		_ = c.Close()
	}()
	_ = c.Close()
	for i, d := range dones {
		select {
		case <-d:
		case <-time.After(2 * time.Second):
			t.Errorf("hold %d: Done not closed after Close", i)
		}
	}
}

// panicOnSecondAcquired is an Observer whose Acquired panics from the
// second hold on.
type panicOnSecondAcquired struct {
	redlock.NopObserver
	n atomic.Int32
}

func (p *panicOnSecondAcquired) Acquired(string, uint64, time.Duration) {
	if p.n.Add(1) >= 2 {
		panic("observer: Acquired")
	}
}

// TestHandOffWithAPanickingObserverLetsTheWaiterGo: Unlock hands the key on
// to this Client's waiting head; the transfer runs on the Unlock caller's
// goroutine, and an Observer whose Acquired panics there unwinds it before
// the head is told the outcome. The head must still return (its key, a
// retry's, or an error) well before its ctx ends: the key's 1s TTL runs
// out on the nodes in any case.
func TestHandOffWithAPanickingObserverLetsTheWaiterGo(t *testing.T) {
	r := newRig(t, 3)
	obs := &panicOnSecondAcquired{}
	fake := clock.NewFake(epoch)
	c := r.client(t, redlock.WithClock(fake), redlock.WithObserver(obs), redlock.WithRetry(fixedBackoff(100*time.Millisecond)))
	ctx := t.Context()
	const ttl = time.Second
	l, err := c.TryLock(ctx, "k", ttl)
	if err != nil {
		t.Fatal(err)
	}
	hctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	head := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				head <- nil // the head's own acquire hit the Observer: it returned
			}
		}()
		hl, err := c.Lock(hctx, "k", ttl)
		if err == nil {
			_ = hl.Unlock(ctx)
		}
		head <- err
	}()
	waitSubscribed(t, r.clients, "fencedlock:released:k")
	if err := fake.BlockUntilContext(hctx, 1); err != nil { // the head sleeps its backoff, its offer made
		t.Fatal(err)
	}
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Logf("Unlock panicked: %v", p)
			}
		}()
		_ = l.Unlock(ctx)
	}()
	// Time passes on both clocks: the head's backoffs fall due, the
	// key's TTL runs out on the nodes.
	for deadline := time.Now().Add(10 * ttl); ; {
		select {
		case err := <-head:
			t.Logf("head: %v; Acquired calls %d", err, obs.n.Load())
			return
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the head has waited %v (and %v on the client clock) since the hand-off panicked, key TTL %v: it waits for its ctx",
				10*ttl, fake.Since(epoch), ttl)
		}
		fake.Advance(10 * time.Millisecond)
		time.Sleep(10 * time.Millisecond) // real time for the key's TTL, bounded by deadline
	}
}
