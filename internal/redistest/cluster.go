package redistest

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/internal/redisproc"
)

// StartCluster starts a Redis Cluster of shards primaries (no replicas): it
// splits the 16384 slots evenly with CLUSTER ADDSLOTSRANGE, joins the nodes
// with CLUSTER MEET and waits until every node reports cluster_state:ok. Each
// node's cluster bus gets its own free port (the default, port+10000, may not
// exist for an ephemeral port).
func StartCluster(t testing.TB, shards int, opts ...Option) []*redisproc.Proc {
	t.Helper()
	procs := make([]*redisproc.Proc, shards)
	buses := make([]int, shards)
	for i := range procs {
		procs[i], buses[i] = startClusterNode(t, opts)
	}
	ctx := context.Background()
	admins := make([]*redis.Client, shards)
	for i, p := range procs {
		admins[i] = Client(t, p)
		lo, hi := i*16384/shards, (i+1)*16384/shards-1
		if err := admins[i].ClusterAddSlotsRange(ctx, lo, hi).Err(); err != nil {
			t.Fatalf("redistest: CLUSTER ADDSLOTSRANGE %d %d on %s: %v", lo, hi, p.Addr(), err)
		}
	}
	for i := 1; i < shards; i++ {
		err := admins[0].Do(ctx, "CLUSTER", "MEET", "127.0.0.1", procs[i].Port(), buses[i]).Err()
		if err != nil {
			t.Fatalf("redistest: CLUSTER MEET %s: %v", procs[i].Addr(), err)
		}
	}
	want := "cluster_known_nodes:" + strconv.Itoa(shards)
	waitFor(t, 30*time.Second, "cluster_state:ok on every node", func() bool {
		for _, a := range admins {
			info, err := a.ClusterInfo(ctx).Result()
			if err != nil || !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, want) {
				return false
			}
		}
		return true
	})
	return procs
}

func startClusterNode(t testing.TB, opts []Option) (*redisproc.Proc, int) {
	t.Helper()
	var lastErr error
	for range 5 { // the bus port was free a moment ago; someone may take it
		bus, err := redisproc.FreePort()
		if err != nil {
			t.Fatalf("redistest: %v", err)
		}
		var cfg redisproc.Config
		for _, o := range opts {
			o(&cfg)
		}
		cfg.Args = append(cfg.Args, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-port", strconv.Itoa(bus))
		p, err := redisproc.Start(context.Background(), cfg)
		if err == nil {
			t.Cleanup(func() { _ = p.Close() })
			return p, bus
		}
		lastErr = err
	}
	t.Fatalf("redistest: cluster node: %v", lastErr)
	return nil, 0
}

// ClusterClient returns a go-redis cluster client seeded with every node of
// the cluster, closed at the end of the test.
func ClusterClient(t testing.TB, procs []*redisproc.Proc) *redis.ClusterClient {
	t.Helper()
	addrs := make([]string, len(procs))
	for i, p := range procs {
		addrs[i] = p.Addr()
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// StartRing starts shards independent servers and returns them with a
// go-redis Ring over them; shard i is named "shard<i>".
func StartRing(t testing.TB, shards int, opts ...Option) ([]*redisproc.Proc, *redis.Ring) {
	t.Helper()
	procs := StartN(t, shards, opts...)
	addrs := make(map[string]string, shards)
	for i, p := range procs {
		addrs["shard"+strconv.Itoa(i)] = p.Addr()
	}
	r := redis.NewRing(&redis.RingOptions{Addrs: addrs})
	t.Cleanup(func() { _ = r.Close() })
	return procs, r
}

// waitFor polls cond until it holds, and fails the test after timeout.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("redistest: no %s after %v", what, timeout)
		}
		time.Sleep(5 * time.Millisecond) // polling a server-side condition
	}
}
