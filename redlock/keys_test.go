package redlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/clock"
	"github.com/fencedlock/fencedlock/redlock"
)

// Odd keys: hash tags, binary, huge. Each must lock with a token, keep out a
// second holder, wake a waiter in another Client on Unlock (the waiter's
// backoff is on a fake clock that never moves: only the release can wake
// it), and leave nothing behind.
func TestOddKeys(t *testing.T) {
	t.Parallel() // a fake clock and roomy bounds: runs beside the others of its kind
	for _, tc := range []struct{ name, key string }{
		{"empty tag", "{}"},
		{"open brace", "{"},
		{"close brace first", "}{a}"},
		{"two tags", "{a}{b}"},
		{"tag mid", "user:{42}:lock"},
		{"binary", "\x00\xff\xfe\r\n*1\r\n$4\r\nPING\r\n"},
		{"not utf-8", "\xc3\x28"},
		{"64 KiB", strings.Repeat("k", 64<<10)},
		{"channel-like", "fencedlock:released:x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, 3)
			holder := r.client(t)
			fake := clock.NewFake(epoch)
			waiter := r.client(t, redlock.WithClock(fake), redlock.WithRetry(fixedBackoff(time.Minute)))
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			l, err := holder.TryLock(ctx, tc.key, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if l.Token() == 0 || l.Key() != tc.key {
				t.Fatalf("token %d, key %d bytes", l.Token(), len(l.Key()))
			}
			if _, err := holder.TryLock(ctx, tc.key, time.Minute); !errors.Is(err, redlock.ErrNotAcquired) {
				t.Fatalf("second TryLock: %v, want ErrNotAcquired", err)
			}
			got := make(chan *redlock.Lock, 1)
			go func() {
				l2, err := waiter.Lock(ctx, tc.key, time.Minute)
				if err != nil {
					t.Errorf("waiter: %v", err)
				}
				got <- l2
			}()
			if err := fake.BlockUntilContext(ctx, 1); err != nil { // the waiter sleeps
				t.Fatal(err)
			}
			waitSubscribed(t, r.clients, "fencedlock:released:"+tc.key)
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			l2 := <-got
			if l2 == nil {
				return
			}
			if l2.Token() <= l.Token() {
				t.Fatalf("waiter's token %d, not above %d", l2.Token(), l.Token())
			}
			if err := l2.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			// Unlock decides at a quorum; the last release lands soon after.
			eventually(t, time.Now().Add(10*time.Second), "key gone from every node", func() bool {
				return r.anyKey(t, tc.key) == 0
			})
		})
	}
}

// A lock key that is itself a fence counter (the one of its own slot) can
// never be held: its acquire would INCR the value it just set. It is bad
// input, and must not disturb the counter other keys of the slot draw from.
func TestFenceCounterAsLockKeyIsRejected(t *testing.T) {
	r := newRig(t, 3)
	c := r.client(t)
	ctx := t.Context()
	const other = "x"
	fk := redlock.FenceKey(other)
	l, err := c.TryLock(ctx, other, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Unlock(ctx)
	if redlock.FenceKey(fk) != fk {
		t.Skipf("FenceKey(%q) = %q: not its own counter", fk, redlock.FenceKey(fk))
	}
	_, err = c.TryLock(ctx, fk, time.Minute)
	if !errors.Is(err, redlock.ErrInvalidArgument) {
		t.Errorf("TryLock(%q): %v, want ErrInvalidArgument", fk, err)
	}
	l, err = c.TryLock(ctx, other, time.Minute)
	if err != nil {
		t.Fatalf("TryLock(%q) after the fence-key attempt: %v", other, err)
	}
	if l.Token() != 2 {
		t.Errorf("token %d, want 2", l.Token())
	}
}
