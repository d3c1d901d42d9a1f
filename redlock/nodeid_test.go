package redlock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/internal/redistest"
	"github.com/fencedlock/fencedlock/redlock"
)

// Two Sentinel-managed primaries are two nodes, though go-redis gives every
// failover client the same placeholder address; the same client twice is
// still one node.
func TestNewIdentifiesSentinelNodes(t *testing.T) {
	s := redistest.StartSentinel(t, "alpha", "beta")
	alpha, beta := s.FailoverClient(t, "alpha"), s.FailoverClient(t, "beta")
	plain := redistest.Client(t, redistest.Start(t))
	ctx := t.Context()

	c, err := redlock.New([]redis.UniversalClient{alpha, beta, plain})
	if err != nil {
		t.Fatalf("two primaries and a plain node: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	l, err := c.TryLock(ctx, "k", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// Each primary holds its own grant: they are distinct servers. TryLock
	// returns at a quorum, so the last grant may still be on its way.
	for name, p := range s.Primaries {
		rc := redistest.Client(t, p)
		deadline := time.Now().Add(5 * time.Second)
		for rc.Get(ctx, "k").Val() != l.Value() && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond) // polling a server condition
		}
		if got := rc.Get(ctx, "k").Val(); got != l.Value() {
			t.Errorf("primary %s holds %q, want the hold's value", name, got)
		}
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	if _, err := redlock.New([]redis.UniversalClient{alpha, beta, alpha}); !errors.Is(err, redlock.ErrInvalidArgument) {
		t.Fatalf("the same failover client twice: %v, want ErrInvalidArgument", err)
	}
	// Cluster clients without seed addresses (as Sentinel-managed clusters
	// are) are told apart by identity too.
	fa := redis.NewFailoverClusterClient(&redis.FailoverOptions{MasterName: "alpha", SentinelAddrs: []string{s.Proc.Addr()}})
	fb := redis.NewFailoverClusterClient(&redis.FailoverOptions{MasterName: "beta", SentinelAddrs: []string{s.Proc.Addr()}})
	t.Cleanup(func() { _ = fa.Close(); _ = fb.Close() })
	if _, err := redlock.New([]redis.UniversalClient{fa, fb, plain}); err != nil {
		t.Fatalf("two failover cluster clients: %v", err)
	}
	if _, err := redlock.New([]redis.UniversalClient{fa, plain, fa}); !errors.Is(err, redlock.ErrInvalidArgument) {
		t.Fatalf("the same failover cluster client twice: %v, want ErrInvalidArgument", err)
	}
}

// New compares the addresses a node names, without I/O: a server shared by
// two nodes would count twice toward quorum.
func TestNewRejectsSharedAddresses(t *testing.T) {
	const a, b, c = "127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"
	plain := func(addr string) redis.UniversalClient {
		cl := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { _ = cl.Close() })
		return cl
	}
	cluster := func(addrs ...string) redis.UniversalClient {
		cl := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
		t.Cleanup(func() { _ = cl.Close() })
		return cl
	}
	ring := func(addrs ...string) redis.UniversalClient {
		m := make(map[string]string)
		for i, addr := range addrs {
			m[string(rune('a'+i))] = addr
		}
		cl := redis.NewRing(&redis.RingOptions{Addrs: m})
		t.Cleanup(func() { _ = cl.Close() })
		return cl
	}
	for _, tc := range []struct {
		name  string
		nodes []redis.UniversalClient
		ok    bool
	}{
		{"distinct", []redis.UniversalClient{plain(a), cluster(b), ring(c)}, true},
		{"cluster seeds in another order", []redis.UniversalClient{cluster(a, b), cluster(b, a), plain(c)}, false},
		{"clusters sharing a seed", []redis.UniversalClient{cluster(a, b), cluster(b, c), plain("127.0.0.1:4")}, false},
		{"plain client on a cluster seed", []redis.UniversalClient{plain(a), cluster(a, b), plain(c)}, false},
		{"plain client on a ring shard", []redis.UniversalClient{ring(a, b), plain(b), plain(c)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl, err := redlock.New(tc.nodes)
			if tc.ok {
				if err != nil {
					t.Fatal(err)
				}
				_ = cl.Close()
				return
			}
			if !errors.Is(err, redlock.ErrInvalidArgument) {
				t.Fatalf("New: %v, want ErrInvalidArgument", err)
			}
		})
	}
}
