package backendtest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/chaos/backend"
)

// ReplicatedBackend is a DirectBackend whose nodes have replicas.
type ReplicatedBackend interface {
	DirectBackend
	backend.Replicated
}

// WaitLimit bounds a WAIT for a replica that should acknowledge: the
// default start timeout of a process node, the harness's bound on a
// server's readiness.
const WaitLimit = 10 * time.Second

// CheckFailoverLoses checks backend.Failover on node i of b, whose
// Sentinel's timing derives from ttl: the failover promotes the replica,
// and the node's address then leads to a primary that takes writes. What
// was replicated before it is kept; what the primary acknowledged while
// its replication was held back is gone, from the promoted replica and,
// once the old primary has rejoined as its replica, from the pair. The
// pair is whole again after the undo. replicaAddr is the own address of
// node i's replica now. It returns how long the failover and the rejoin
// took.
func CheckFailoverLoses(t *testing.T, b ReplicatedBackend, i int, ttl time.Duration, replicaAddr func() string) (failover, rejoin time.Duration) {
	t.Helper()
	ctx := t.Context()
	// WAIT blocks for its timeout: no read timeout shorter than the
	// longest below.
	c := redis.NewClient(&redis.Options{Addr: b.Nodes()[i].Addr(), ReadTimeout: 2 * WaitLimit, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	var promos *Promotions
	if p, ok := b.(backend.Promotions); ok {
		promos = ListenPromotions(t, p)
	}
	before, err := b.DirectAddr(i)
	if err != nil {
		t.Fatal(err)
	}
	// How long the replica takes to acknowledge a write here: a write
	// not acknowledged in many times that is held back, not slow.
	ackRTT := WaitLimit
	for k := range 5 {
		start := time.Now()
		if n := SetAndWait(t, c, fmt.Sprint("kept", k), WaitLimit); n != 1 {
			t.Fatalf("WAIT after a write with no fault: %d replicas", n)
		}
		ackRTT = min(ackRTT, time.Since(start))
	}
	ackWait := max(20*ackRTT, 10*time.Millisecond)

	// The lag is what a chaos plan gives it (a quarter of the TTL), or
	// longer if the writes below, each taking up to ackWait, need it.
	lag := max(ttl/4, 20*ackWait)
	t.Logf("ack %v, lag %v", ackRTT, lag)
	t0 := time.Now()
	undo := make(chan func(context.Context) error, 1)
	injected := make(chan error, 1)
	go func() {
		u, err := backend.Failover{Node: i, Lag: lag}.Inject(ctx, b)
		undo <- u
		injected <- err
	}()
	// Write until a write does not reach the replica in many times what an
	// acknowledgement takes: the hold has begun, and the replica, which is
	// to be promoted, never gets it. (A write that reached the replica
	// unacknowledged, its acknowledgement request held back, is kept.)
	rc := NewClient(t, replicaAddr())
	lost := ""
	for k := 0; lost == ""; k++ {
		key := fmt.Sprint("written", k)
		if SetAndWait(t, c, key, ackWait) == 1 {
			continue // replicated before the hold: kept
		}
		if v, err := Get(ctx, rc, key); err != nil {
			t.Fatal(err)
		} else if v == "" {
			lost = key
		}
	}
	if err := <-injected; err != nil {
		t.Fatal(err)
	}
	failover = time.Since(t0)
	after, err := b.DirectAddr(i)
	if err != nil {
		t.Fatal(err)
	}
	if after == before {
		t.Fatalf("direct address %s unchanged by the failover", after)
	}
	// The node's address reaches the promoted replica, a primary.
	Eventually(t, 5*time.Second, "a write through the node's address", func() error {
		return c.Set(ctx, "after", "v", 0).Err()
	})
	checkKeys(t, c, lost)

	t0 = time.Now()
	if err := (<-undo)(ctx); err != nil {
		t.Fatal(err)
	}
	rejoin = time.Since(t0)
	if promos != nil {
		// The failover's own promotion is a fault of the schedule's, not
		// one to report.
		if got := promos.Nodes(); len(got) != 0 {
			t.Errorf("the failover's own promotion reported as one no failover asked for: nodes %v", got)
		}
	}
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(info, "role:master") || !strings.Contains(info, "connected_slaves:1") || !strings.Contains(info, "state=online") {
		t.Fatalf("after the rejoin the node's primary reports:\n%s", info)
	}
	if got := replicaAddr(); got != before {
		t.Fatalf("replica after the rejoin is %s, want the old primary %s", got, before)
	}
	// The old primary had the lost write: the resync dropped it.
	if n := SetAndWait(t, c, "rejoined", WaitLimit); n != 1 {
		t.Fatalf("WAIT after the rejoin: %d replicas", n)
	}
	checkKeys(t, c, lost)
	rc = NewClient(t, replicaAddr())
	if v, err := Get(ctx, rc, lost); err != nil || v != "" {
		t.Fatalf("the old primary, now a replica, still has %s: %q, %v", lost, v, err)
	}
	return failover, rejoin
}

// SetAndWait sets key and returns how many replicas acknowledged it within
// timeout (WAIT).
func SetAndWait(t testing.TB, c *redis.Client, key string, timeout time.Duration) int64 {
	t.Helper()
	if err := c.Set(t.Context(), key, "v", 0).Err(); err != nil {
		t.Fatalf("SET %s: %v", key, err)
	}
	// Wait, not Do: go-redis then reads the reply for as long as WAIT
	// may block, past the client's own ReadTimeout.
	n, err := c.Wait(t.Context(), 1, max(time.Millisecond, timeout)).Result()
	if err != nil {
		t.Fatalf("WAIT: %v", err)
	}
	return n
}

// checkKeys: every key written before lost (kept0..., written0...) is
// there, lost is not.
func checkKeys(t *testing.T, c *redis.Client, lost string) {
	t.Helper()
	ctx := t.Context()
	if v, err := Get(ctx, c, lost); err != nil || v != "" {
		t.Errorf("%s, written while the replica lagged, survived the failover: %q, %v", lost, v, err)
	}
	var n int
	if _, err := fmt.Sscanf(lost, "written%d", &n); err != nil {
		t.Fatal(err)
	}
	keys := []string{"kept0", "kept4"}
	for k := range n {
		keys = append(keys, fmt.Sprint("written", k))
	}
	for _, k := range keys {
		if v, err := Get(ctx, c, k); err != nil || v != "v" {
			t.Errorf("%s, replicated before the failover, is lost: %q, %v", k, v, err)
		}
	}
}

// Promotions records what a backend reports through
// backend.Promotions.OnPromotion from the call on, until the test ends.
type Promotions struct {
	mu    sync.Mutex // protects nodes
	nodes []int
}

// ListenPromotions starts recording b's reports of promotions that no
// failover asked for.
func ListenPromotions(t testing.TB, b backend.Promotions) *Promotions {
	p := &Promotions{}
	b.OnPromotion(func(node int, _ time.Time) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.nodes = append(p.nodes, node)
	})
	t.Cleanup(func() { b.OnPromotion(nil) })
	return p
}

// Nodes returns the nodes of the promotions reported so far, in order.
func (p *Promotions) Nodes() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.nodes)
}
