package process_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/chaos/backend"
	"github.com/fencedlock/fencedlock/chaos/backend/backendtest"
	"github.com/fencedlock/fencedlock/chaos/backend/process"
)

// replicaTTL is the lock TTL the replicated backends of these tests derive
// Sentinel's timing from: the default TTL of a chaos run.
const replicaTTL = time.Second

// waitLimit bounds a WAIT for a replica that should acknowledge: the
// default start timeout of a node, the harness's bound on a server's
// readiness.
const waitLimit = 10 * time.Second

// A failover promotes the replica; the node's address then leads to a
// primary that takes writes. What was replicated before it is kept; what
// the primary acknowledged while its replication stream was held back is
// gone, from the promoted replica and, once the old primary has rejoined as
// its replica, from the pair. The pair is whole again after the undo.
func TestFailoverLosesWhatTheReplicaLacked(t *testing.T) {
	t0 := time.Now()
	b := newBackend(t, 1, process.WithReplicas(replicaTTL))
	t.Logf("started in %v", time.Since(t0))
	ctx := t.Context()
	// WAIT blocks for its timeout: no read timeout shorter than the
	// longest below.
	c := redis.NewClient(&redis.Options{Addr: b.Nodes()[0].Addr(), ReadTimeout: 2 * waitLimit, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	before, err := b.DirectAddr(0)
	if err != nil {
		t.Fatal(err)
	}
	// How long the replica takes to acknowledge a write here: a write
	// not acknowledged in many times that is held back, not slow.
	ackRTT := waitLimit
	for i := range 5 {
		start := time.Now()
		if n := setAndWait(t, c, fmt.Sprint("kept", i), waitLimit); n != 1 {
			t.Fatalf("WAIT after a write with no fault: %d replicas", n)
		}
		ackRTT = min(ackRTT, time.Since(start))
	}
	ackWait := max(20*ackRTT, 10*time.Millisecond)

	// The lag is what a chaos plan gives it (a quarter of the TTL), or
	// longer if the writes below, each taking up to ackWait, need it.
	lag := max(replicaTTL/4, 20*ackWait)
	t.Logf("ack %v, lag %v", ackRTT, lag)
	t0 = time.Now()
	undo := make(chan func(context.Context) error, 1)
	injected := make(chan error, 1)
	go func() {
		u, err := backend.Failover{Node: 0, Lag: lag}.Inject(ctx, b)
		undo <- u
		injected <- err
	}()
	// Write until a write does not reach the replica in many times what an
	// acknowledgement takes: the hold has begun, and the replica, which is
	// to be promoted, never gets it. (A write that reached the replica
	// unacknowledged, its acknowledgement request held back, is kept.)
	rc := backendtest.NewClient(t, process.ReplicaAddr(b, 0))
	lost := ""
	for i := 0; lost == ""; i++ {
		key := fmt.Sprint("written", i)
		if setAndWait(t, c, key, ackWait) == 1 {
			continue // replicated before the hold: kept
		}
		if v, err := backendtest.Get(ctx, rc, key); err != nil {
			t.Fatal(err)
		} else if v == "" {
			lost = key
		}
	}
	if err := <-injected; err != nil {
		t.Fatal(err)
	}
	t.Logf("failed over in %v", time.Since(t0))
	after, err := b.DirectAddr(0)
	if err != nil {
		t.Fatal(err)
	}
	if after == before {
		t.Fatalf("direct address %s unchanged by the failover", after)
	}
	// The node's address reaches the promoted replica, a primary.
	backendtest.Eventually(t, 5*time.Second, "a write through the node's address", func() error {
		return c.Set(ctx, "after", "v", 0).Err()
	})
	checkKeys(t, c, lost)

	t0 = time.Now()
	if err := (<-undo)(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("rejoined in %v", time.Since(t0))
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(info, "role:master") || !strings.Contains(info, "connected_slaves:1") || !strings.Contains(info, "state=online") {
		t.Fatalf("after the rejoin the node's primary reports:\n%s", info)
	}
	if got := process.ReplicaAddr(b, 0); got != before {
		t.Fatalf("replica after the rejoin is %s, want the old primary %s", got, before)
	}
	// The old primary had the lost write: the resync dropped it.
	if n := setAndWait(t, c, "rejoined", waitLimit); n != 1 {
		t.Fatalf("WAIT after the rejoin: %d replicas", n)
	}
	checkKeys(t, c, lost)
	rc = backendtest.NewClient(t, process.ReplicaAddr(b, 0))
	if v, err := backendtest.Get(ctx, rc, lost); err != nil || v != "" {
		t.Fatalf("the old primary, now a replica, still has %s: %q, %v", lost, v, err)
	}
}

// setAndWait sets key and returns how many replicas acknowledged it within
// timeout (WAIT).
func setAndWait(t *testing.T, c *redis.Client, key string, timeout time.Duration) int64 {
	t.Helper()
	if err := c.Set(t.Context(), key, "v", 0).Err(); err != nil {
		t.Fatalf("SET %s: %v", key, err)
	}
	n, err := c.Do(t.Context(), "WAIT", 1, max(1, timeout.Milliseconds())).Int64()
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
	if v, err := backendtest.Get(ctx, c, lost); err != nil || v != "" {
		t.Errorf("%s, written while the replica lagged, survived the failover: %q, %v", lost, v, err)
	}
	var n int
	if _, err := fmt.Sscanf(lost, "written%d", &n); err != nil {
		t.Fatal(err)
	}
	keys := []string{"kept0", "kept4"}
	for i := range n {
		keys = append(keys, fmt.Sprint("written", i))
	}
	for _, k := range keys {
		if v, err := backendtest.Get(ctx, c, k); err != nil || v != "v" {
			t.Errorf("%s, replicated before the failover, is lost: %q, %v", k, v, err)
		}
	}
}

// A primary paused for longer than Sentinel's down-after is failed over by
// Sentinel on its own, as in production: the node's address follows the
// promotion (Sentinel's +switch-master, nothing else, moves it), and the
// paused server, resumed, rejoins as a replica.
func TestReplicatedPauseFailsOver(t *testing.T) {
	b := newBackend(t, 1, process.WithReplicas(replicaTTL))
	ctx := t.Context()
	c := backendtest.NewClient(t, b.Nodes()[0].Addr())
	paused, err := b.DirectAddr(0)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Pause(ctx, 0); err != nil {
		t.Fatal(err)
	}
	// Sentinel's bound: down-after and one failover attempt, well within
	// the harness's start timeout.
	backendtest.Eventually(t, waitLimit, "a write through the node's address", func() error {
		return c.Set(ctx, "k", "v", 0).Err()
	})
	if now, err := b.DirectAddr(0); err != nil || now == paused {
		t.Fatalf("primary after the pause: %s, %v (paused %s)", now, err, paused)
	}
	if err := b.Rejoin(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if got := process.ReplicaAddr(b, 0); got != paused {
		t.Fatalf("replica after the rejoin is %s, want the paused server %s", got, paused)
	}
}
