package process_test

import (
	"slices"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/chaos/backend/backendtest"
	"github.com/fencedlock/fencedlock/chaos/backend/process"
)

// replicaTTL is the lock TTL the replicated backends of these tests derive
// Sentinel's timing from: the default TTL of a chaos run.
const replicaTTL = time.Second

// A failover loses what the replica lacked: see
// backendtest.CheckFailoverLoses.
func TestFailoverLosesWhatTheReplicaLacked(t *testing.T) {
	t0 := time.Now()
	b := newBackend(t, 1, process.WithReplicas(replicaTTL))
	t.Logf("started in %v", time.Since(t0))
	failover, rejoin := backendtest.CheckFailoverLoses(t, b, 0, replicaTTL, func() string { return process.ReplicaAddr(b, 0) })
	t.Logf("failed over in %v, rejoined in %v", failover, rejoin)
}

// A primary paused for longer than Sentinel's down-after is failed over by
// Sentinel on its own, as in production: the node's address follows the
// promotion (Sentinel's +switch-master, nothing else, moves it), and the
// paused server, resumed, rejoins as a replica.
func TestReplicatedPauseFailsOver(t *testing.T) {
	b := newBackend(t, 1, process.WithReplicas(replicaTTL))
	ctx := t.Context()
	c := backendtest.NewClient(t, b.Nodes()[0].Addr())
	promos := backendtest.ListenPromotions(t, b)
	paused, err := b.DirectAddr(0)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Pause(ctx, 0); err != nil {
		t.Fatal(err)
	}
	// Sentinel's bound: down-after and one failover attempt, well within
	// the harness's start timeout.
	backendtest.Eventually(t, backendtest.WaitLimit, "a write through the node's address", func() error {
		return c.Set(ctx, "k", "v", 0).Err()
	})
	if now, err := b.DirectAddr(0); err != nil || now == paused {
		t.Fatalf("primary after the pause: %s, %v (paused %s)", now, err, paused)
	}
	// That promotion lost what the replica lacked, and no failover fault
	// asked for it: the backend tells of it, once.
	if got := promos.Nodes(); !slices.Equal(got, []int{0}) {
		t.Fatalf("promotions reported: nodes %v, want [0]", got)
	}
	if err := b.Rejoin(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if got := process.ReplicaAddr(b, 0); got != paused {
		t.Fatalf("replica after the rejoin is %s, want the paused server %s", got, paused)
	}
}
