package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/internal/redisproc"
	"github.com/fencedlock/fencedlock/internal/redistest"
	"github.com/fencedlock/fencedlock/redlock"
)

// Values that sort after and before every hold value of this era (hold
// values start with the time in milliseconds, UUID version 7 layout): a
// contender's key set directly on a node wins or loses a split vote at will.
const (
	bigValue   = "ffffffff-ffff-7fff-bfff-ffffffffffff"
	smallValue = "00000000-0000-7000-8000-000000000000"
)

type rig struct {
	procs   []*redisproc.Proc
	clients []redis.UniversalClient
	rtt     time.Duration // the slowest node's PING round trip, measured at start
}

// newRig starts n real redis-server nodes and a go-redis client for each.
func newRig(t testing.TB, n int, opts ...redistest.Option) *rig {
	t.Helper()
	procs := redistest.StartN(t, n, opts...)
	cs := make([]redis.UniversalClient, n)
	for i, p := range procs {
		// go-redis defaults but for retries: the worst case the lock must
		// handle (no ContextTimeoutEnabled: a frozen node holds its calls).
		c := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1})
		t.Cleanup(func() { _ = c.Close() })
		cs[i] = c
	}
	r := &rig{procs: procs, clients: cs}
	for _, c := range cs {
		// The first command dials: measure the round trip after it.
		if err := c.Ping(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := c.Ping(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
		r.rtt = max(r.rtt, time.Since(start))
	}
	return r
}

// client is a Client on the rig's nodes. Its node timeout is derived from
// the measured round trip (a loaded machine's round trips are long, and the
// default of a twentieth of a short TTL would fail healthy nodes there);
// opts can set another, and tests of the default build their own Client.
func (r *rig) client(t testing.TB, opts ...redlock.Option) *redlock.Client {
	t.Helper()
	opts = append([]redlock.Option{redlock.WithNodeTimeout(max(250*time.Millisecond, 100*r.rtt))}, opts...)
	c, err := redlock.New(r.clients, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// holders counts the nodes whose key holds value.
func (r *rig) holders(t *testing.T, key, value string) int {
	t.Helper()
	n := 0
	for _, c := range r.clients {
		v, err := c.Get(t.Context(), key).Result()
		if err == nil && v == value {
			n++
		}
	}
	return n
}

// anyKey counts the live nodes where key exists at all.
func (r *rig) anyKey(t *testing.T, key string) int {
	t.Helper()
	n := 0
	for i, c := range r.clients {
		if !r.procs[i].Running() {
			continue
		}
		if c.Exists(t.Context(), key).Val() == 1 {
			n++
		}
	}
	return n
}

// settled waits until every node holds key with value: the grants decided
// after the quorum have all landed (polling a server condition, bounded).
func (r *rig) settled(t *testing.T, key, value string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for r.holders(t, key, value) < len(r.clients) {
		if time.Now().After(deadline) {
			t.Fatalf("key %q held on %d of %d nodes", key, r.holders(t, key, value), len(r.clients))
		}
		time.Sleep(time.Millisecond)
	}
}
