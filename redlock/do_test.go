package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fencedlock/fencedlock/redlock"
)

// A user's fn that panics inside Do must not leave the lock held: the
// watchdog would extend it forever. The panic goes on with its own value.
func TestDoReleasesTheLockWhenFnPanics(t *testing.T) {
	r := newRig(t, 3)
	ttl := 2 * time.Second
	// A node timeout well above a loaded machine's hiccups; the test is
	// about the watchdog, not about latency.
	c := r.client(t, redlock.WithNodeTimeout(ttl/4))
	ctx := t.Context()
	// Warm up, so that the client's lasting goroutines (per-node workers,
	// go-redis's connections) exist before the snapshot.
	l, err := c.TryLock(ctx, "warm-up", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	before := goleak.IgnoreCurrent()

	boom := errors.New("boom")
	var ran bool
	recovered := func() (p any) {
		defer func() { p = recover() }()
		_ = c.Do(ctx, "k", ttl, func(context.Context, *redlock.Lock) error {
			ran = true
			panic(boom)
		})
		return nil
	}()
	if !ran {
		t.Fatal("fn did not run")
	}
	if recovered != boom {
		t.Fatalf("recovered %v, want the fn's own panic value", recovered)
	}
	// The key goes at once (Unlock decides at quorum; the rest follow). A
	// watchdog still running would keep it for ever: wait several of its
	// periods (ttl/3) before calling it kept.
	deadline := time.Now().Add(3 * ttl)
	for r.anyKey(t, "k") > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("key still on %d nodes (PTTL %v) %v after fn panicked: the watchdog keeps extending it",
				r.anyKey(t, "k"), r.clients[0].PTTL(ctx, "k").Val(), 3*ttl)
		}
		time.Sleep(time.Millisecond) // polling a server-side condition
	}
	// No goroutine of the Do (its watcher, the watchdog, the expiry monitor)
	// is left, before Close would stop them.
	goleak.VerifyNone(t, before)
}

// fn may release early with l.Unlock: Do returns fn's own result, not
// ErrLockLost, and the key is free at once.
func TestDoWhenFnUnlocksItself(t *testing.T) {
	r := newRig(t, 3)
	c := r.client(t)
	other := r.client(t)
	err := c.Do(t.Context(), "early", time.Minute, func(ctx context.Context, l *redlock.Lock) error {
		if err := l.Unlock(ctx); err != nil {
			return err
		}
		l2, err := other.TryLock(context.WithoutCancel(ctx), "early", time.Minute)
		if err != nil {
			return fmt.Errorf("the key is not free after fn's Unlock: %w", err)
		}
		return l2.Unlock(context.WithoutCancel(ctx))
	})
	if err != nil {
		t.Fatalf("Do: %v, want nil", err)
	}
}

// fn releases early with l.Unlock but the hold was already gone — taken
// over on every node while fn ran, before the watchdog's next extension
// could notice. Unlock tells fn so (ErrLockLost); Do, which promises
// ErrLockLost whenever the lock was lost while fn ran, must say so too,
// even when fn drops Unlock's error.
func TestDoWhenFnUnlocksALostHold(t *testing.T) {
	r := newRig(t, 3)
	c := r.client(t)
	var unlockErr error
	err := c.Do(t.Context(), "lost-early", time.Minute, func(ctx context.Context, l *redlock.Lock) error {
		for _, rc := range r.clients { // another holder, as after an expiry
			if err := rc.Set(ctx, "lost-early", "someone-else", time.Minute).Err(); err != nil {
				return err
			}
		}
		unlockErr = l.Unlock(ctx)
		return nil // fn drops Unlock's error
	})
	if !errors.Is(unlockErr, redlock.ErrLockLost) {
		t.Fatalf("fn's Unlock: %v, want ErrLockLost", unlockErr)
	}
	if !errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("Do: %v, want ErrLockLost: the lock was lost while fn ran", err)
	}
}

// fn releases early and goes on: its ctx stays alive (the release is no
// loss), Do returns fn's result, and a ctx of fn's that Do cancels only
// at the end.
func TestDoKeepsFnCtxAfterItsUnlock(t *testing.T) {
	r := newRig(t, 3)
	c := r.client(t)
	sentinel := errors.New("fn's own result")
	err := c.Do(t.Context(), "early-ctx", time.Minute, func(ctx context.Context, l *redlock.Lock) error {
		if err := l.Unlock(ctx); err != nil {
			return err
		}
		<-l.Done()
		// Do's watcher saw Done: had it taken Unlock for a loss, ctx would
		// be cancelled by now or within a round trip of work; do some.
		for range 10 {
			if err := r.clients[0].Ping(ctx).Err(); err != nil {
				return err
			}
		}
		if ctx.Err() != nil {
			return errors.New("fn's ctx was cancelled after its own Unlock")
		}
		return sentinel
	})
	if !errors.Is(err, sentinel) || errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("Do: %v, want fn's result alone", err)
	}
}
