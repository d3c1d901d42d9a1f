package redlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/internal/redistest"
)

// An acquire that a node marked down failed at once was never sent: it
// made no grant there, and the attempt owes that node no release (one
// would be retried, failing, until the key's TTL). A refused attempt with
// node 2 killed and marked down owes nothing once node 1's step back
// landed.
func TestNoReleaseOwedForACallNeverSent(t *testing.T) {
	const ttl = 10 * time.Second
	procs := redistest.StartN(t, 3)
	nodes := make([]redis.UniversalClient, len(procs))
	for i, p := range procs {
		rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1})
		t.Cleanup(func() { _ = rdb.Close() })
		if err := rdb.Ping(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
		nodes[i] = rdb
	}
	c, err := New(nodes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := procs[2].Kill(); err != nil {
		t.Fatal(err)
	}
	// Held on node 0 by a value older than any (it wins every split vote):
	// node 1 grants, and steps back at once.
	try := func(key string) {
		t.Helper()
		if err := nodes[0].Set(t.Context(), key, "0", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := c.TryLock(t.Context(), key, ttl); !errors.Is(err, ErrNotAcquired) {
			t.Fatalf("TryLock of %s: %v, want ErrNotAcquired", key, err)
		}
	}
	try("first") // node 2's failure marks it down
	deadline := time.Now().Add(ttl / 10)
	for !c.isDown(2) {
		if time.Now().After(deadline) {
			t.Fatal("node 2 not marked down")
		}
		time.Sleep(time.Millisecond) // polling the mark, bounded
	}
	// What "first" owes node 2 (its call was sent: an error may hide a
	// grant) is retried until its TTL: once its first release answered,
	// start counting from an empty schedule.
	settled, cancelSettled := context.WithTimeout(t.Context(), 2*c.nodeTimeout(ttl))
	defer cancelSettled()
	c.inflight.wait(settled.Done())
	owedBefore := c.sched.funcs()
	for _, key := range []string{"k0", "k1", "k2", "k3", "k4"} {
		try(key)
	}
	// Releases answer by their node timeout; a failed one is scheduled
	// again at once.
	ctx, cancel := context.WithTimeout(t.Context(), 2*c.nodeTimeout(ttl))
	defer cancel()
	c.inflight.wait(ctx.Done())
	if owed := c.sched.funcs() - owedBefore; owed > 0 {
		t.Fatalf("%d releases owed to the nodes after attempts whose only failures were calls never sent", owed)
	}
}

// funcs counts the funcs scheduled (see at): owed releases' retries.
func (s *scheduler) funcs() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, h := range s.holds {
		if h.l == nil {
			n++
		}
	}
	return n
}
