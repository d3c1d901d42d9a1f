package redlock_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/redlock"
)

// seedCounters sets key's fence counter on each node to the given values.
func (r *rig) seedCounters(t *testing.T, key string, values ...uint64) {
	t.Helper()
	for i, v := range values {
		if err := r.clients[i].Set(t.Context(), redlock.FenceKey(key), strconv.FormatUint(v, 10), 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// counterOf reads node i's fence counter for key as an exact integer.
func (r *rig) counterOf(t *testing.T, i int, key string) uint64 {
	t.Helper()
	s, err := r.clients[i].Get(t.Context(), redlock.FenceKey(key)).Result()
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Tokens past 2^53 stay exact: a Lua double would round 2^53+1 down to 2^53
// and hand two holds the same token.
func TestTokensExactPast2to53(t *testing.T) {
	const p53 = uint64(1) << 53
	for _, tc := range []struct {
		name  string
		seeds []uint64 // per node
		want  []uint64 // tokens of successive holds
		held  int      // a node where another value holds the key (refuses), or -1
	}{
		{"healthy", []uint64{p53 - 1, p53 - 1, p53 - 1}, []uint64{p53, p53 + 1, p53 + 2, p53 + 3}, -1},
		// Counters diverged by one, and node 2 refuses: the grants are
		// nodes 0 and 1, the fast path must see that node 1 is ahead, and
		// the raise must really lift node 0 (and the heal node 2).
		{"diverged", []uint64{p53, p53 + 1, p53}, []uint64{p53 + 2, p53 + 3, p53 + 4}, 2},
		{"near 2^63", []uint64{1<<63 - 6, 1<<63 - 6, 1<<63 - 6}, []uint64{1<<63 - 5, 1<<63 - 4, 1<<63 - 3}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, 3)
			c := r.client(t)
			r.seedCounters(t, "big", tc.seeds...)
			if tc.held >= 0 {
				if err := r.clients[tc.held].Set(t.Context(), "big", "other", 0).Err(); err != nil {
					t.Fatal(err)
				}
			}
			for k, want := range tc.want {
				l, err := c.TryLock(t.Context(), "big", 10*time.Second)
				if err != nil {
					t.Fatalf("hold %d: %v", k, err)
				}
				if l.Token() != want {
					t.Fatalf("hold %d: token %d, want %d", k, l.Token(), want)
				}
				if err := l.Unlock(t.Context()); err != nil {
					t.Fatal(err)
				}
				// What the nodes keep is exact too: after the hold, a quorum
				// has the token (the raise) and, once healed, all of them.
				r.settledCounters(t, "big", want)
			}
		})
	}
}

// settledCounters waits until every node's counter for key is at least
// token: the heals of lagging nodes are sent in the background.
func (r *rig) settledCounters(t *testing.T, key string, token uint64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for i := range r.clients {
		for r.counterOf(t, i, key) < token {
			if time.Now().After(deadline) {
				t.Fatalf("node %d: counter %d below token %d", i, r.counterOf(t, i, key), token)
			}
			time.Sleep(time.Millisecond) // polling a server condition
		}
	}
}

// At the int64 maximum the counter cannot move on: the acquisition fails
// with a clear error and leaves no key behind, rather than wrapping or
// repeating a token.
func TestTokenExhausted(t *testing.T) {
	r := newRig(t, 3)
	c := r.client(t)
	const max = uint64(1<<63 - 1)
	r.seedCounters(t, "end", max-1, max-1, max-1)
	l, err := c.TryLock(t.Context(), "end", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l.Token() != max {
		t.Fatalf("token %d, want %d", l.Token(), max)
	}
	if err := l.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, err = c.TryLock(t.Context(), "end", 10*time.Second)
	if !errors.Is(err, redlock.ErrNotAcquired) || !errors.Is(err, redlock.ErrTokenExhausted) {
		t.Fatalf("TryLock at the maximum: %v, want ErrNotAcquired and ErrTokenExhausted", err)
	}
	_ = c.Close()
	if n := r.anyKey(t, "end"); n != 0 {
		t.Fatalf("key left on %d nodes", n)
	}
	for i := range r.clients {
		if got := r.counterOf(t, i, "end"); got != max {
			t.Fatalf("node %d: counter %d, want it left at %d", i, got, max)
		}
	}
}

// At the int64 maximum no attempt can ever succeed: Lock and Do must fail
// with ErrTokenExhausted, as TryLock does, not retry until their ctx ends
// and then report only the ctx.
func TestTokenExhaustedFailsLockAndDoClearly(t *testing.T) {
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
