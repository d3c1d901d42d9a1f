package redlock

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestOptionalHooksCostNothingUnused: with an Observer that implements none
// of the optional interfaces, the lock's calls to them allocate nothing.
func TestOptionalHooksCostNothingUnused(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled: New does no I/O
	defer rdb.Close()
	for _, tc := range []struct {
		name string
		o    Observer
	}{{"default", nil}, {"plain observer", NopObserver{}}, {"Observers of plain ones", Observers(NopObserver{}, NopObserver{})}} {
		t.Run(tc.name, func(t *testing.T) {
			var opts []Option
			if tc.o != nil {
				opts = append(opts, WithObserver(tc.o))
			}
			c, err := New([]redis.UniversalClient{rdb}, opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx := context.Background()
			g := &group{c: c}
			o := &op{node: 0}
			since := c.cfg.clock.Now()
			allocs := testing.AllocsPerRun(1000, func() {
				tr := c.startOp(ctx, OpAcquire, "k", 0)
				g.answered(o, nil)
				endOp(tr, 1, nil)
				c.acquireReturned("k", 1, nil, since)
			})
			if allocs != 0 {
				t.Errorf("%v allocations per call of the unused hooks, want 0", allocs)
			}
			if c.cfg.hooks != (hooks{}) {
				t.Errorf("hooks %+v found on an Observer that implements none", c.cfg.hooks)
			}
		})
	}
}
