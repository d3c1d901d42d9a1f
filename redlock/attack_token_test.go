package redlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/redlock"
)

// At the int64 maximum no attempt can ever succeed: Lock and Do must fail
// with ErrTokenExhausted, as TryLock does, not retry until their ctx ends
// and then report only the ctx.
func TestAttackTokenExhaustedLockFailsClearly(t *testing.T) {
	for _, call := range []string{"Lock", "Do"} {
		t.Run(call, func(t *testing.T) {
			r := newRig(t, 3)
			c := r.client(t)
			const max = uint64(1<<63 - 1)
			r.seedCounters(t, "end", max, max, max)
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			var err error
			if call == "Lock" {
				_, err = c.Lock(ctx, "end", 10*time.Second)
			} else {
				err = c.Do(ctx, "end", 10*time.Second, func(context.Context, *redlock.Lock) error { return nil })
			}
			if !errors.Is(err, redlock.ErrNotAcquired) || !errors.Is(err, redlock.ErrTokenExhausted) {
				t.Fatalf("%s at the maximum: %v, want ErrNotAcquired and ErrTokenExhausted", call, err)
			}
			if ctx.Err() != nil {
				t.Fatalf("%s retried until its ctx ended: %v", call, err)
			}
		})
	}
}
