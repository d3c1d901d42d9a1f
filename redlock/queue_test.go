package redlock_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/redlock"
)

// Waiters for one key in one process queue up: a release wakes the head,
// and the queue moves in arrival order. These tests queue several Lock
// calls of one Client behind a holder, each only once the one before is
// known to be queued, so the arrival order is the order they were started.

// goid is the calling goroutine's id, as runtime.Stack names it.
func goid() string {
	var buf [64]byte
	s := strings.TrimPrefix(string(buf[:runtime.Stack(buf[:], false)]), "goroutine ")
	return s[:strings.IndexByte(s, ' ')]
}

// parkedInLock reports whether goroutine id is blocked, on a channel or a
// condition, inside a Client.Lock call: for a Lock behind other waiters of
// its process, that is waiting its turn. (A call on the wire would be in IO
// wait or running.)
func parkedInLock(id string) bool {
	buf := make([]byte, 64<<10)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	prefix := "goroutine " + id + " ["
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if !strings.HasPrefix(g, prefix) {
			continue
		}
		state, _, _ := strings.Cut(g[len(prefix):], "]")
		parked := false
		for _, s := range []string{"select", "chan receive", "sync.Cond.Wait"} {
			parked = parked || strings.HasPrefix(state, s)
		}
		return parked && strings.Contains(g, "redlock.(*Client).Lock(")
	}
	return false
}

type waitResult struct {
	k        int
	token    uint64 // of the hold, when Lock succeeded
	err      error  // Lock's, or else Unlock's
	returned time.Time
}

// queueWaiters starts one Lock of key on c per ctx, in order, each once the
// one before is queued. A waiter that gets the lock unlocks it at once.
func queueWaiters(t *testing.T, r *rig, c *redlock.Client, key string, ctxs []context.Context, deadline time.Time) <-chan waitResult {
	t.Helper()
	results := make(chan waitResult, len(ctxs))
	for k, ctx := range ctxs {
		ids := make(chan string, 1)
		go func() {
			ids <- goid()
			l, err := c.Lock(ctx, key, time.Minute)
			res := waitResult{k: k, err: err, returned: time.Now()}
			if err == nil {
				res.token = l.Token()
				res.err = l.Unlock(context.WithoutCancel(ctx))
			}
			results <- res
		}()
		id := <-ids
		if k == 0 {
			waitForSubscriber(t, r, key) // the head listens for releases once queued
		}
		eventually(t, deadline, fmt.Sprintf("waiter %d queued", k), func() bool { return parkedInLock(id) })
	}
	return results
}

// collect receives n results, failing the test at deadline.
func collect(t *testing.T, results <-chan waitResult, n int, deadline time.Time) []waitResult {
	t.Helper()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	var got []waitResult
	for len(got) < n {
		select {
		case res := <-results:
			got = append(got, res)
		case <-timer.C:
			t.Fatalf("%d of %d waiters returned by the deadline: %+v", len(got), n, got)
		}
	}
	return got
}

// acquisitionOrder sorts results by token (tokens grow with each hold)
// and returns the waiters' numbers in that order.
func acquisitionOrder(t *testing.T, got []waitResult) []int {
	t.Helper()
	slices.SortFunc(got, func(a, b waitResult) int { return cmp.Compare(a.token, b.token) })
	var order []int
	for _, res := range got {
		if res.err != nil {
			t.Fatalf("waiter %d: %v", res.k, res.err)
		}
		order = append(order, res.k)
	}
	return order
}

func TestLocalWaitersAcquireInArrivalOrder(t *testing.T) {
	r := newRig(t, 3)
	nt := roomyNodeTimeout(measureRTT(t, r.clients))
	// An hour's backoff: only releases move the queue.
	c := r.client(t, redlock.WithNodeTimeout(nt), redlock.WithRetry(fixedBackoff(time.Hour)))
	holder := setupHold(t, c, "fifo")
	const n = 5
	deadline := time.Now().Add(20 * n * nt)
	ctxs := make([]context.Context, n)
	for k := range ctxs {
		ctxs[k] = t.Context()
	}
	results := queueWaiters(t, r, c, "fifo", ctxs, deadline)
	if err := holder.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	order := acquisitionOrder(t, collect(t, results, n, deadline))
	if !slices.Equal(order, []int{0, 1, 2, 3, 4}) {
		t.Fatalf("waiters acquired in the order %v, want their arrival order [0 1 2 3 4]", order)
	}
}

func TestCancelledWaiterLeavesTheQueue(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cancelled int // which of 3 waiters
	}{{"behind the head", 1}, {"the head", 0}, {"the last", 2}} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, 3)
			nt := roomyNodeTimeout(measureRTT(t, r.clients))
			c := r.client(t, redlock.WithNodeTimeout(nt), redlock.WithRetry(fixedBackoff(time.Hour)))
			holder := setupHold(t, c, "q")
			deadline := time.Now().Add(60 * nt)
			ctxs := []context.Context{t.Context(), t.Context(), t.Context()}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			ctxs[tc.cancelled] = ctx
			results := queueWaiters(t, r, c, "q", ctxs, deadline)

			cancel()
			cancelledAt := time.Now()
			// Queued, it waits on nothing but its turn: it returns at once,
			// well within a node timeout.
			res := collect(t, results, 1, cancelledAt.Add(10*nt))[0]
			if res.k != tc.cancelled {
				t.Fatalf("waiter %d returned (%v), not the cancelled %d", res.k, res.err, tc.cancelled)
			}
			if !errors.Is(res.err, redlock.ErrNotAcquired) || !errors.Is(res.err, context.Canceled) {
				t.Errorf("cancelled waiter: %v, want ErrNotAcquired joined with context.Canceled", res.err)
			}
			if took := res.returned.Sub(cancelledAt); took > nt {
				t.Errorf("cancelled waiter returned %v after its ctx ended, want within a node timeout (%v)", took, nt)
			}

			// The others still get the lock, in their order.
			if err := holder.Unlock(t.Context()); err != nil {
				t.Fatal(err)
			}
			order := acquisitionOrder(t, collect(t, results, 2, deadline))
			want := slices.DeleteFunc([]int{0, 1, 2}, func(k int) bool { return k == tc.cancelled })
			if !slices.Equal(order, want) {
				t.Fatalf("remaining waiters acquired in the order %v, want %v", order, want)
			}
		})
	}
}
