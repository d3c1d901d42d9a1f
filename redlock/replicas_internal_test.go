package redlock

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/internal/holdproxy"
	"github.com/fencedlock/fencedlock/internal/redistest"
)

// startLaggingPair starts a primary with one replica that reaches it
// through a proxy, which can hold the replication stream back. It returns
// clients to both (two to the primary: each keeps its own connections, and
// WAIT counts the writes of its own) and the proxy, once the replica has
// caught up.
func startLaggingPair(t *testing.T) (primary, other, replica *redis.Client, link *holdproxy.Proxy) {
	t.Helper()
	// A diskless first sync waits repl-diskless-sync-delay (5s by default)
	// for more replicas to share it: there is one.
	p := redistest.Start(t, redistest.WithArgs("--repl-diskless-sync-delay", "0"))
	link, err := holdproxy.Start(p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = link.Close() })
	_, port, _ := net.SplitHostPort(link.Addr())
	r := redistest.Start(t, redistest.WithArgs("--replicaof", "127.0.0.1", port))
	primary, other, replica = redistest.Client(t, p), redistest.Client(t, p), redistest.Client(t, r)
	caughtUp(t, other)
	return primary, other, replica, link
}

// caughtUp writes a marker on the primary and waits (WAIT, on the same
// connection) until the replica acknowledged it and everything before it;
// a first sync waits for the primary's repl-diskless-sync-delay (none
// here: see startLaggingPair).
func caughtUp(t *testing.T, primary *redis.Client) {
	t.Helper()
	conn := primary.Conn()
	defer conn.Close()
	if err := conn.Set(t.Context(), "caught-up", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		n, err := conn.Do(t.Context(), "WAIT", 1, 1000).Int64() // within go-redis's ReadTimeout
		if err == nil && n == 1 {
			return
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("replica did not catch up: %d, %v", n, err)
		}
	}
}

// A raise counts toward a token's quorum: with replica acknowledgements it
// must count only once the node's replicas have the counter at the token.
// When the counter on the primary is already there (another key of its
// slot drew it, or a heal lifted it, neither confirmed by a replica), the
// raise writes nothing on its connection, so a WAIT after it confirms
// nothing about the counter: the replica may still be below the token, and
// a failover would take the token back.
func TestReplicaAcksRaiseCoversTheCounter(t *testing.T) {
	primary, other, replica, link := startLaggingPair(t)
	const nodeTimeout = time.Second // WAIT's own timeout plays no part here
	c, err := New([]redis.UniversalClient{primary}, WithReplicaAcks(1), WithNodeTimeout(nodeTimeout))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	const key, value = "raise:key", "raise:value"
	fence := FenceKey(key)
	for _, tc := range []struct {
		name    string
		counter string // on the primary only, when the raise runs
		token   string
	}{
		{"counter below the token", "5", "20"},
		{"counter already at the token", "20", "20"},
		{"counter past the token", "30", "20"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			// The hold's key and a counter below the token are on both.
			if err := other.MSet(ctx, key, value, fence, "5").Err(); err != nil {
				t.Fatal(err)
			}
			caughtUp(t, other)
			link.Hold()
			defer func() {
				link.Release()
				caughtUp(t, other)
			}()
			// Written by another client: the Client's connections never saw it.
			if err := other.Set(ctx, fence, tc.counter, 0).Err(); err != nil {
				t.Fatal(err)
			}
			v, err := c.call(0, raiseScript, nodeTimeout, []string{key, fence}, value, tc.token)
			got, _ := replica.Get(ctx, fence).Result()
			t.Logf("raise: %v, %v; replica counter %s", v, err, got)
			if err == nil && isYes(v) {
				t.Fatalf("raise to %s counted while the replica has counter %s", tc.token, got)
			}
			if !errors.Is(err, ErrReplicaAcks) {
				t.Fatalf("raise: %v, %v; want ErrReplicaAcks", v, err)
			}
		})
	}
}
