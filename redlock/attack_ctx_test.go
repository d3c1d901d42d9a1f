package redlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/redlock"
)

// A caller whose ctx ends gets its answer at once: an attempt that waits on
// a frozen node must not hold its caller until that node's timeout once the
// caller's ctx has ended. Its grants are released in the background.
func TestAttackCtxEndReturnsPromptlyWithFrozenNode(t *testing.T) {
	for _, call := range []string{"TryLock", "Lock"} {
		t.Run(call, func(t *testing.T) {
			r := newRig(t, 3)
			rtt := measureRTT(t, r.clients)
			const nodeTimeout = 5 * time.Second
			c := r.client(t, redlock.WithNodeTimeout(nodeTimeout))
			// Someone else holds node 0; node 2 is frozen: the attempt has
			// node 1's grant and waits for node 2 (a grace of a quarter of
			// the node timeout) when the caller's ctx ends.
			if err := r.clients[0].Set(t.Context(), "k", smallValue, time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
			if err := r.procs[2].Pause(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = r.procs[2].Resume() })
			budget := roomyNodeTimeout(rtt)
			ctx, cancel := context.WithTimeout(t.Context(), budget)
			defer cancel()
			start := time.Now()
			var err error
			if call == "TryLock" {
				_, err = c.TryLock(ctx, "k", time.Minute)
			} else {
				_, err = c.Lock(ctx, "k", time.Minute)
			}
			over := time.Since(start) - budget
			if !errors.Is(err, redlock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("%s: %v, want ErrNotAcquired and DeadlineExceeded", call, err)
			}
			// Releasing node 1's grant is one round trip; give it many.
			if limit := budget; over > limit {
				t.Fatalf("%s returned %v after its ctx ended (node timeout %v); want within %v",
					call, over, nodeTimeout, limit)
			}
			t.Logf("%s returned %v after its ctx ended", call, over)
			// Node 2 is still frozen: ask node 0 alone (a GET on node 2
			// would wait out go-redis's read timeout).
			if v, err := r.clients[0].Get(t.Context(), "k").Result(); err != nil || v != smallValue {
				t.Fatalf("the other holder's key is gone from node 0: %q, %v", v, err)
			}
			eventually(t, time.Now().Add(nodeTimeout), "node 1 released", func() bool {
				return r.clients[1].Exists(t.Context(), "k").Val() == 0
			})
		})
	}
}
