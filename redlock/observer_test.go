package redlock_test

import (
	"errors"
	"testing"
	"time"

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
