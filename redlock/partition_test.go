package redlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/internal/redistest"
	"github.com/fencedlock/fencedlock/redlock"
	"github.com/fencedlock/fencedlock/redlocktest"
)

// A partition differs from a kill and from a pause: the node runs on, its
// clients' requests are lost on the way (never carried out, not even late),
// and their calls time out. These tests cut nodes off through the public
// test helpers, as a user's tests would.

// partitionClient is a Client on nodes, with the rig's node timeout derived
// from the measured round trip.
func partitionClient(t *testing.T, nodes redlocktest.NodeSet) (*redlock.Client, time.Duration) {
	t.Helper()
	nodeTimeout := max(250*time.Millisecond, 100*redistest.PingRTT(t, nodes.Clients()))
	c, err := redlock.New(nodes.Clients(), redlock.WithNodeTimeout(nodeTimeout))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, nodeTimeout
}

// TestTryLockWithAMinorityPartitioned: the quorum decides; the cut-off
// node's timeout is not waited for, and the grant sent to it never lands.
func TestTryLockWithAMinorityPartitioned(t *testing.T) {
	nodes := redlocktest.Nodes(t, 3)
	c, nodeTimeout := partitionClient(t, nodes)
	ctx := t.Context()
	nodes[2].Partition()
	start := time.Now()
	l, err := c.TryLock(ctx, "k", 20*nodeTimeout)
	if err != nil {
		t.Fatalf("TryLock with 1 of 3 nodes cut off: %v", err)
	}
	if took := time.Since(start); took >= nodeTimeout {
		t.Errorf("TryLock took %v, want less than the node timeout %v: it waited for the cut-off node", took, nodeTimeout)
	}
	direct := redis.NewClient(&redis.Options{Addr: nodes[2].ServerAddr(), MaxRetries: -1})
	t.Cleanup(func() { _ = direct.Close() })
	if err := direct.Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
		t.Errorf("the cut-off node holds the key (GET: %v): the grant crossed the partition", err)
	}
	if err := l.Unlock(ctx); errors.Is(err, redlock.ErrLockLost) {
		t.Errorf("Unlock: %v, want no ErrLockLost (a quorum held it)", err)
	}
}

// TestPartitionedMajorityEndsTheHold: nothing says the hold is gone, so the
// watchdog retries its extensions until the validity runs out; then Done
// closes. After Heal, the next holder's token is larger.
func TestPartitionedMajorityEndsTheHold(t *testing.T) {
	nodes := redlocktest.Nodes(t, 3)
	c, nodeTimeout := partitionClient(t, nodes)
	ctx := t.Context()
	// The watchdog extends every ttl/3: a third of this TTL is more than two
	// node timeouts, so that each extension ends before the next is due.
	ttl := 8 * nodeTimeout
	l, err := c.TryLock(ctx, "k", ttl, redlock.AutoExtend())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes[:2] {
		n.Partition()
	}
	// The last extension before the cut set Until; the watchdog's check
	// after it comes within a few node timeouts.
	limit := time.NewTimer(time.Until(l.Until()) + 4*nodeTimeout)
	defer limit.Stop()
	select {
	case <-l.Done():
	case <-limit.C:
		t.Fatalf("Done still open %v after Until, with 2 of 3 nodes cut off", time.Since(l.Until()))
	}
	if now := time.Now(); now.Before(l.Until()) {
		t.Errorf("Done closed %v before Until, though no node said the hold was gone", l.Until().Sub(now))
	}
	for _, n := range nodes[:2] {
		n.Heal()
	}
	// The old hold's keys expire on the nodes by its TTL: the next Lock
	// waits for them.
	wait, cancel := context.WithTimeout(ctx, 2*ttl)
	defer cancel()
	next, err := c.Lock(wait, "k", ttl)
	if err != nil {
		t.Fatalf("Lock after Heal: %v", err)
	}
	if next.Token() <= l.Token() {
		t.Errorf("token %d after the partition, want more than %d", next.Token(), l.Token())
	}
	_ = next.Unlock(ctx)
}
