package redlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/internal/redistest"
	"github.com/fencedlock/fencedlock/redlock"
)

// A node may be any go-redis UniversalClient: a plain client, a Ring, a
// Cluster client or a Sentinel failover client. Each must lock, fence and
// wake a waiter through pub/sub like a plain one, and none may crash the
// process.
func TestEveryNodeKind(t *testing.T) {
	t.Parallel() // waits on servers starting and calls timing out, not on timing: runs beside the others of its kind
	ring := func(t *testing.T) redis.UniversalClient { _, r := redistest.StartRing(t, 2); return r }
	cluster := func(t *testing.T) redis.UniversalClient {
		return redistest.ClusterClient(t, redistest.StartCluster(t, 3))
	}
	failover := func(t *testing.T) redis.UniversalClient {
		return redistest.StartSentinel(t, "primary").FailoverClient(t, "primary")
	}
	plain := func(t *testing.T) redis.UniversalClient { return redistest.Client(t, redistest.Start(t)) }
	for _, tc := range []struct {
		name  string
		nodes []func(t *testing.T) redis.UniversalClient
	}{
		{"plain", []func(*testing.T) redis.UniversalClient{plain}},
		{"ring", []func(*testing.T) redis.UniversalClient{ring}},
		{"cluster", []func(*testing.T) redis.UniversalClient{cluster}},
		{"failover", []func(*testing.T) redis.UniversalClient{failover}},
		{"mixed", []func(*testing.T) redis.UniversalClient{ring, cluster, failover}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := make([]redis.UniversalClient, len(tc.nodes))
			for i, start := range tc.nodes {
				nodes[i] = start(t)
			}
			checkNodeKind(t, nodes)
		})
	}
}

func checkNodeKind(t *testing.T, nodes []redis.UniversalClient) {
	// A backoff far longer than the test: only a release announced through
	// pub/sub can wake the waiter in time.
	const backoff = time.Minute
	slow := redlock.WithRetry(fixedBackoff(backoff))
	// A first call to a Cluster or Sentinel client makes several round trips
	// (topology, dial, script load): a generous node timeout keeps a loaded
	// machine from failing a test that is not about latency.
	patient := redlock.WithNodeTimeout(backoff / 12)
	holder, err := redlock.New(nodes, slow, patient)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Close() })
	waiter, err := redlock.New(nodes, slow, patient) // as another process would
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = waiter.Close() })
	ctx := t.Context()

	// Several keys, so that the keys' shards and the channels' shards differ
	// for some of them when a node is a Ring.
	for _, key := range []string{"a", "b", "c", "d", "{tag}e"} {
		l, err := holder.TryLock(ctx, key, backoff)
		if err != nil {
			t.Fatalf("TryLock %q: %v", key, err)
		}
		if _, err := waiter.TryLock(ctx, key, backoff); !errors.Is(err, redlock.ErrNotAcquired) {
			t.Fatalf("second TryLock %q: %v, want ErrNotAcquired", key, err)
		}
		type result struct {
			l   *redlock.Lock
			err error
		}
		got := make(chan result, 1)
		wctx, cancel := context.WithTimeout(ctx, backoff/6)
		defer cancel()
		go func() {
			wl, err := waiter.Lock(wctx, key, backoff)
			got <- result{wl, err}
		}()
		waitSubscribed(t, nodes, "fencedlock:released:"+key)
		if err := l.Unlock(ctx); err != nil {
			t.Fatalf("Unlock %q: %v", key, err)
		}
		res := <-got
		if res.err != nil {
			t.Fatalf("waiter for %q was not woken by the release: %v", key, res.err)
		}
		if res.l.Token() <= l.Token() {
			t.Fatalf("%q: waiter token %d after %d", key, res.l.Token(), l.Token())
		}
		if err := res.l.Unlock(ctx); err != nil {
			t.Fatalf("waiter Unlock %q: %v", key, err)
		}
		again, err := holder.TryLock(ctx, key, backoff)
		if err != nil {
			t.Fatalf("TryLock %q after the waiter's Unlock: %v", key, err)
		}
		if again.Token() <= res.l.Token() {
			t.Fatalf("%q: token %d after %d", key, again.Token(), res.l.Token())
		}
		if err := again.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// waitSubscribed polls PUBSUB NUMSUB until every node listens on channel:
// on some server of a Cluster (whose pub/sub reaches every member), on
// every shard of a Ring (whose shards do not share pub/sub).
func waitSubscribed(t *testing.T, nodes []redis.UniversalClient, channel string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, n := range nodes {
		for {
			counts := numSub(t.Context(), n, channel)
			ok := len(counts) > 0
			if _, isRing := n.(*redis.Ring); isRing {
				for _, c := range counts {
					ok = ok && c > 0
				}
			} else {
				var sum int64
				for _, c := range counts {
					sum += c
				}
				ok = sum > 0
			}
			if ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%T: subscribers of %s per server: %v", n, channel, counts)
			}
			time.Sleep(time.Millisecond) // polling a server-side condition
		}
	}
}

// numSub is PUBSUB NUMSUB channel on each server behind n.
func numSub(ctx context.Context, n redis.UniversalClient, channel string) []int64 {
	var (
		mu     sync.Mutex
		counts []int64
	)
	each := func(ctx context.Context, c *redis.Client) error {
		var v int64
		for _, ch := range subscribedAs(ctx, c, channel) {
			v += c.PubSubNumSub(ctx, ch).Val()[ch]
		}
		mu.Lock()
		counts = append(counts, v)
		mu.Unlock()
		return nil
	}
	eachServer(ctx, n, each)
	return counts
}

// eachServer runs each on every server of n whose pub/sub a release may
// reach: each shard of a Ring, each master of a Cluster, a Client itself.
func eachServer(ctx context.Context, n redis.UniversalClient, each func(context.Context, *redis.Client) error) {
	switch n := n.(type) {
	case *redis.Ring:
		_ = n.ForEachShard(ctx, each)
	case *redis.ClusterClient:
		_ = n.ForEachMaster(ctx, each)
	case *redis.Client:
		_ = each(ctx, n)
	}
}
