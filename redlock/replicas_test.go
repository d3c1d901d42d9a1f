package redlock_test

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/internal/holdproxy"
	"github.com/fencedlock/fencedlock/internal/redisproc"
	"github.com/fencedlock/fencedlock/internal/redistest"
	"github.com/fencedlock/fencedlock/redlock"
)

// pair is a primary with one replica, both real redis-server processes;
// the replica reaches its primary through a proxy that can hold the
// replication stream back, as a slow or cut link does.
type pair struct {
	primary, replica *redisproc.Proc
	link             *holdproxy.Proxy
}

// startPairs starts n primaries, each with a replica attached and caught up.
func startPairs(t testing.TB, n int) []pair {
	t.Helper()
	pairs := make([]pair, n)
	for i := range pairs {
		// A diskless first sync waits repl-diskless-sync-delay (5s by
		// default) for more replicas to share it: there is one.
		p := redistest.Start(t, redistest.WithArgs("--repl-diskless-sync-delay", "0"))
		link, err := holdproxy.Start(p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = link.Close() })
		_, port, _ := net.SplitHostPort(link.Addr())
		r := redistest.Start(t, redistest.WithArgs("--replicaof", "127.0.0.1", port))
		pairs[i] = pair{p, r, link}
		pc := redistest.Client(t, p)
		eventually(t, time.Now().Add(10*time.Second), "replica attached to "+p.Addr(), func() bool {
			info, err := pc.Info(t.Context(), "replication").Result()
			return err == nil && strings.Contains(info, "connected_slaves:1") && strings.Contains(info, "state=online")
		})
	}
	return pairs
}

func primaries(t testing.TB, pairs []pair) []redis.UniversalClient {
	t.Helper()
	var cs []redis.UniversalClient
	for _, p := range pairs {
		cs = append(cs, redistest.Client(t, p.primary))
	}
	return cs
}

// failover promotes the pair's replica the way a failover does after the
// primary is gone: the primary is killed first, so the replica keeps only
// what reached it before.
func failover(t *testing.T, p pair) *redis.Client {
	t.Helper()
	if err := p.primary.Kill(); err != nil {
		t.Fatal(err)
	}
	rc := redistest.Client(t, p.replica)
	if err := rc.Do(t.Context(), "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	return rc
}

// TestReplicaAcksKeepGrantsThroughFailover: with the replication streams
// held back (a lagging link), a Client without replica
// acknowledgements acquires at once, and after every pair fails over the
// grant is gone and a second Client acquires too: two holders. With
// WithReplicaAcks(1), the same acquire fails with ErrReplicaAcks in its
// chain and leaves no grant behind, and with the replicas up it succeeds
// with the key and the counter on the replicas by the time it returns.
func TestReplicaAcksKeepGrantsThroughFailover(t *testing.T) {
	for _, tc := range []struct {
		name string
		acks int
	}{
		{"without acknowledgements", 0},
		{"with one replica acknowledging", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pairs := startPairs(t, 3)
			nodes := primaries(t, pairs)
			replicasAcking(t, nodes) // a replica just attached may answer its first WAIT late
			rtt := redistest.PingRTT(t, nodes)
			nodeTimeout := max(250*time.Millisecond, 100*rtt)
			opts := []redlock.Option{redlock.WithNodeTimeout(nodeTimeout)}
			if tc.acks > 0 {
				opts = append(opts, redlock.WithReplicaAcks(tc.acks))
			}
			c, err := redlock.New(nodes, opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			const key = "failover:key"

			// Replicas up: every grant reaches them before TryLock returns
			// (with acknowledgements; without, it usually does too).
			l, err := c.TryLock(t.Context(), key, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if tc.acks > 0 {
				// The nodes whose grants counted (a late one may still be
				// on its way when TryLock returns at a quorum).
				for _, i := range l.Nodes() {
					rc := redistest.Client(t, pairs[i].replica)
					if v := rc.Get(t.Context(), key).Val(); v != l.Value() {
						t.Errorf("replica of node %d holds %q right after TryLock, want %q", i, v, l.Value())
					}
					if n, _ := rc.Get(t.Context(), redlock.FenceKey(key)).Uint64(); n < l.Token() {
						t.Errorf("replica of node %d has counter %d right after TryLock, token %d", i, n, l.Token())
					}
				}
			}
			if err := l.Unlock(t.Context()); err != nil {
				t.Fatal(err)
			}
			// Unlock returns at a quorum, before its releases reach every
			// replica: a replica promoted with this hold's key would refuse
			// the second Client for a reason other than the one shown here.
			for i, p := range pairs {
				rc := redistest.Client(t, p.replica)
				eventually(t, time.Now().Add(10*time.Second), fmt.Sprintf("release on replica %d", i), func() bool {
					return rc.Exists(t.Context(), key).Val() == 0
				})
			}

			for _, p := range pairs {
				p.link.Hold()
			}
			start := time.Now()
			l, err = c.TryLock(t.Context(), key, 10*time.Second)
			took := time.Since(start)
			if tc.acks > 0 {
				if !errors.Is(err, redlock.ErrNotAcquired) || !errors.Is(err, redlock.ErrReplicaAcks) {
					t.Fatalf("TryLock with paused replicas: %v, want ErrNotAcquired and ErrReplicaAcks", err)
				}
				if took > 3*nodeTimeout {
					t.Errorf("TryLock took %v, node timeout %v", took, nodeTimeout)
				}
				// Nothing is left behind on the primaries: every grant
				// that no replica acknowledged is stepped back.
				eventually(t, time.Now().Add(10*time.Second), "grants stepped back", func() bool {
					for _, n := range nodes {
						if n.Exists(t.Context(), key).Val() != 0 {
							return false
						}
					}
					return true
				})
				return
			}
			if err != nil {
				t.Fatalf("TryLock without acknowledgements, replicas paused: %v", err)
			}
			var promoted []redis.UniversalClient
			for _, p := range pairs {
				promoted = append(promoted, failover(t, p))
			}
			c2, err := redlock.New(promoted, opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer c2.Close()
			l2, err := c2.TryLock(t.Context(), key, 10*time.Second)
			if err != nil {
				t.Fatalf("after the failover the grant should be gone (replicas never saw it): %v", err)
			}
			// Two holders at once, and the token went back: what the
			// option exists to prevent.
			if !time.Now().Before(l.Until()) || l2.Token() > l.Token() {
				t.Fatalf("want two holders with a token that went back; first until %v, tokens %d, %d",
					l.Until(), l.Token(), l2.Token())
			}
		})
	}
}

func TestReplicaAcksBadInput(t *testing.T) {
	p := redistest.Start(t)
	_, ring := redistest.StartRing(t, 1)
	cluster := redistest.ClusterClient(t, redistest.StartCluster(t, 1))
	for _, tc := range []struct {
		name  string
		nodes []redis.UniversalClient
		acks  int
	}{
		{"negative", []redis.UniversalClient{redistest.Client(t, p)}, -1},
		{"ring node", []redis.UniversalClient{ring}, 1},
		{"cluster node", []redis.UniversalClient{cluster}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := redlock.New(tc.nodes, redlock.WithReplicaAcks(tc.acks))
			if !errors.Is(err, redlock.ErrInvalidArgument) {
				t.Fatalf("New: %v, want ErrInvalidArgument", err)
			}
			t.Log(err)
		})
	}
}

// TestReplicaAcksThroughSentinel: a node that is a go-redis failover
// client (a *redis.Client that asks Sentinel for its primary) takes
// replica acknowledgements, and WAIT goes to the primary that took the
// write: these primaries have no replica, so every acquire fails with
// ErrReplicaAcks from each node, and leaves no grant behind.
func TestReplicaAcksThroughSentinel(t *testing.T) {
	names := []string{"a", "b", "c"}
	s := redistest.StartSentinel(t, names...)
	var nodes []redis.UniversalClient
	for _, name := range names {
		nodes = append(nodes, s.FailoverClient(t, name))
	}
	c, err := redlock.New(nodes, redlock.WithReplicaAcks(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const key = "sentinel:key"
	_, err = c.TryLock(t.Context(), key, 10*time.Second) // a node timeout of 500ms: a shortfall is then ErrReplicaAcks, see docs/protocol.md
	if !errors.Is(err, redlock.ErrNotAcquired) || !errors.Is(err, redlock.ErrReplicaAcks) {
		t.Fatalf("TryLock: %v, want ErrNotAcquired and ErrReplicaAcks", err)
	}
	t.Log(err)
	eventually(t, time.Now().Add(10*time.Second), "grants stepped back", func() bool {
		for _, n := range nodes {
			if n.Exists(t.Context(), key).Val() != 0 {
				return false
			}
		}
		return true
	})
}
