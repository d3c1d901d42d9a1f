package redlock_test

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/internal/redistest"
	"github.com/fencedlock/fencedlock/redlock"
)

// fenceCounters reads every node's fence counter for key's slot.
func (r *rig) fenceCounters(t *testing.T) []int64 {
	t.Helper()
	out := make([]int64, len(r.clients))
	for i, c := range r.clients {
		keys, err := c.Keys(t.Context(), "fencedlock:fence:*").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			v, _ := c.Get(t.Context(), k).Int64()
			out[i] = max(out[i], v)
		}
	}
	return out
}

func TestTokensMonotonicAcrossRestartsWithoutData(t *testing.T) {
	t.Parallel() // waits on servers starting and calls timing out, not on timing: runs beside the others of its kind
	r := newRig(t, 5)
	c := r.client(t, redlock.WithNodeTimeout(time.Second))
	ctx := t.Context()
	var last uint64
	const rounds = 300
	for i := range rounds {
		if i%10 == 5 {
			// One node at a time loses everything, counters included.
			if err := r.procs[(i/10)%5].Restart(ctx, false); err != nil {
				t.Fatal(err)
			}
		}
		l, err := c.TryLock(ctx, "job", 5*time.Second)
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		if l.Token() <= last {
			t.Fatalf("round %d: token %d after %d", i, l.Token(), last)
		}
		last = l.Token()
		if err := l.Unlock(ctx); err != nil {
			t.Fatalf("round %d unlock: %v", i, err)
		}
	}
	if last < rounds {
		t.Fatalf("last token %d after %d acquisitions", last, rounds)
	}
}

func TestDivergedCountersAreRaised(t *testing.T) {
	r := newRig(t, 5)
	c := r.client(t)
	ctx := t.Context()
	// A first hold tells us the counter key of this slot.
	l, err := c.TryLock(ctx, "k", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	keys := r.clients[0].Keys(ctx, "fencedlock:fence:*").Val()
	if len(keys) != 1 {
		t.Fatalf("fence keys %v", keys)
	}
	// Two nodes are ahead (they granted holds the others lost, say), and
	// node 4 refuses: every quorum of grants mixes high and low counters.
	for i, rc := range r.clients {
		v := 5
		if i < 2 {
			v = 100
		}
		rc.Set(ctx, keys[0], strconv.Itoa(v), 0)
	}
	r.clients[4].Set(ctx, "k", "other", time.Second)
	c = r.client(t)
	l, err = c.TryLock(ctx, "k", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l.Token() != 101 {
		t.Fatalf("token %d, want 101 (max of the grants)", l.Token())
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	for i, v := range r.fenceCounters(t) {
		if v < 101 {
			t.Fatalf("node %d counter %d after a hold with token 101", i, v)
		}
	}
	// And the next hold is on the fast path again, above 101.
	r.clients[4].Del(ctx, "k")
	c = r.client(t)
	l, err = c.TryLock(ctx, "k", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l.Token() != 102 {
		t.Fatalf("next token %d, want 102", l.Token())
	}
}

func TestRefusingLaggingNodeIsHealed(t *testing.T) {
	r := newRig(t, 3)
	ctx := t.Context()
	fk := fenceKeyOf(t, r)
	r.clients[0].Set(ctx, fk, "50", 0)
	r.clients[1].Set(ctx, fk, "50", 0)
	r.clients[2].Set(ctx, fk, "1", 0)
	r.clients[2].Set(ctx, "k", "other", 0) // node 2 refuses
	c := r.client(t)
	l, err := c.TryLock(ctx, "k", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l.Token() != 51 {
		t.Fatalf("token %d, want 51", l.Token())
	}
	_ = c.Close() // the heal runs in the background
	if got := r.fenceCounters(t)[2]; got != 51 {
		t.Fatalf("refusing node's counter %d, want healed to 51", got)
	}
	if v := r.clients[2].Get(ctx, "k").Val(); v != "other" {
		t.Fatalf("the refusing node's key changed to %q", v)
	}
}

func TestRaiseRequiresOwnership(t *testing.T) {
	r := newRig(t, 3)
	ctx := t.Context()
	fk := fenceKeyOf(t, r)
	r.clients[0].Set(ctx, fk, "50", 0)
	r.clients[1].Set(ctx, fk, "1", 0)
	r.clients[2].Set(ctx, fk, "1", 0)
	r.clients[1].Set(ctx, "k", "other", 0) // node 1 refuses: grants are {0, 2}
	// Node 2 grants (counter 2, below node 0's 51), then loses the key before
	// the raise comes (it expired, say): the raise must not count, nor move
	// the counter, and the attempt fails.
	var fired atomic.Bool
	node2 := r.clients[2]
	node2.AddHook(afterScript(func() {
		if fired.CompareAndSwap(false, true) {
			node2.Del(context.Background(), "k")
		}
	}))
	c := r.client(t, redlock.WithNodeTimeout(roomyNodeTimeout(redistest.PingRTT(t, r.clients))))
	_, err := c.TryLock(ctx, "k", time.Second)
	if !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("TryLock: %v, want ErrNotAcquired (only 1 node at the top counter)", err)
	}
	_ = c.Close()
	if got := r.fenceCounters(t); got[2] != 2 {
		t.Fatalf("counters %v: a raise without ownership moved node 2's counter", got)
	}
}

// fenceKeyOf returns the fence counter key of "k" (by taking it once, which
// also loads the scripts).
func fenceKeyOf(t *testing.T, r *rig) string {
	t.Helper()
	c, err := redlock.New(r.clients, redlock.WithNodeTimeout(roomyNodeTimeout(redistest.PingRTT(t, r.clients))))
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.TryLock(t.Context(), "k", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Unlock(t.Context())
	_ = c.Close()
	keys := r.clients[0].Keys(t.Context(), "fencedlock:fence:*").Val()
	if len(keys) != 1 {
		t.Fatalf("fence keys %v", keys)
	}
	return keys[0]
}
