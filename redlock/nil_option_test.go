package redlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/redlock"
)

// A nil Option or LockOption is bad input: ErrInvalidArgument with the
// reason, before any I/O, never a panic.
func TestNilOptions(t *testing.T) {
	r := newRig(t, 3)
	c := r.client(t)
	ctx := t.Context()
	ran := false
	fn := func(context.Context, *redlock.Lock) error { ran = true; return nil }
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"New", func() error { _, err := redlock.New(r.clients, nil); return err }},
		{"New/after a good one", func() error {
			_, err := redlock.New(r.clients, redlock.WithNodeTimeout(time.Second), nil)
			return err
		}},
		{"TryLock", func() error { _, err := c.TryLock(ctx, "k", time.Second, nil); return err }},
		{"TryLock/after a good one", func() error {
			_, err := c.TryLock(ctx, "k", time.Second, redlock.AutoExtend(), nil)
			return err
		}},
		{"Lock", func() error { _, err := c.Lock(ctx, "k", time.Second, nil); return err }},
		{"Lock/after a good one", func() error {
			_, err := c.Lock(ctx, "k", time.Second, redlock.WithLockRetry(redlock.NoRetry()), nil)
			return err
		}},
		{"Do", func() error { return c.Do(ctx, "k", time.Second, fn, nil) }},
		{"Do/after a good one", func() error { return c.Do(ctx, "k", time.Second, fn, redlock.AutoExtend(), nil) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := callNoPanic(t, tc.call)
			if !errors.Is(err, redlock.ErrInvalidArgument) || !strings.Contains(err.Error(), "nil") {
				t.Fatalf("got %v, want ErrInvalidArgument saying the option is nil", err)
			}
		})
	}
	if ran {
		t.Fatal("Do ran fn despite a nil option")
	}
	if n := r.anyKey(t, "k"); n != 0 {
		t.Fatalf("a call with a nil option left the key on %d nodes", n)
	}
}

// callNoPanic runs call, failing the test (not the binary) if it panics.
func callNoPanic(t *testing.T, call func() error) (err error) {
	t.Helper()
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("panicked: %v", p)
		}
	}()
	return call()
}
