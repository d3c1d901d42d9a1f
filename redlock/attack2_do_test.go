package redlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/redlock"
)

// fn releases early with l.Unlock but the hold was already gone — taken
// over on every node while fn ran, before the watchdog's next extension
// could notice. Unlock tells fn so (ErrLockLost); Do, which promises
// ErrLockLost whenever the lock was lost while fn ran, must say so too,
// even when fn drops Unlock's error.
func TestAttack2DoWhenFnUnlocksALostHold(t *testing.T) {
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
func TestAttack2DoFnCtxAfterItsUnlock(t *testing.T) {
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
