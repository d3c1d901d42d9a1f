package docker_test

import (
	"context"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/chaos/backend/backendtest"
	"github.com/fencedlock/fencedlock/chaos/backend/docker"
)

// replicaTTL is the lock TTL the replicated backends of these tests derive
// Sentinel's timing from: the default TTL of a chaos run.
const replicaTTL = time.Second

// Three pairs under one Sentinel container: node 1 fails over and loses
// what its replica lacked (backendtest.CheckFailoverLoses), and rejoins;
// the other pairs keep their primaries.
func TestDockerFailoverLosesWhatTheReplicaLacked(t *testing.T) {
	t0 := time.Now()
	b := newDockerBackend(t, 3, docker.WithReplicas(replicaTTL))
	t.Logf("started 3 pairs and Sentinel in %v", time.Since(t0))
	var others []string
	for _, i := range []int{0, 2} {
		addr, err := b.DirectAddr(i)
		if err != nil {
			t.Fatal(err)
		}
		others = append(others, addr)
	}
	failover, rejoin := backendtest.CheckFailoverLoses(t, b, 1, replicaTTL, func() string { return docker.ReplicaAddr(b, 1) })
	t.Logf("failed over in %v, rejoined in %v", failover, rejoin)
	for k, i := range []int{0, 2} {
		if addr, err := b.DirectAddr(i); err != nil || addr != others[k] {
			t.Errorf("node %d's primary moved from %s to %s (%v) when node 1 failed over", i, others[k], addr, err)
		}
	}
}

// A primary paused or killed for longer than Sentinel's down-after is
// failed over by Sentinel on its own, as in production: the node's address
// follows the promotion (Sentinel's +switch-master, nothing else, moves
// it), and the server, resumed or started again, rejoins as a replica.
func TestDockerReplicatedNodeFaultsFailOver(t *testing.T) {
	b := newDockerBackend(t, 1, docker.WithReplicas(replicaTTL))
	ctx := t.Context()
	c := backendtest.NewClient(t, b.Nodes()[0].Addr())
	for _, tc := range []struct {
		name        string
		fault, undo func(context.Context, int) error
	}{
		{"pause", b.Pause, b.Resume},
		{"kill", b.Kill, b.Start},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stopped, err := b.DirectAddr(0)
			if err != nil {
				t.Fatal(err)
			}
			t0 := time.Now()
			if err := tc.fault(ctx, 0); err != nil {
				t.Fatal(err)
			}
			// Sentinel's bound: down-after and one failover attempt.
			backendtest.Eventually(t, backendtest.WaitLimit, "a write through the node's address", func() error {
				return c.Set(ctx, "k", "v", 0).Err()
			})
			t.Logf("Sentinel failed the stopped primary over in %v", time.Since(t0))
			now, err := b.DirectAddr(0)
			if err != nil || now == stopped {
				t.Fatalf("primary after the %s: %s, %v (stopped %s)", tc.name, now, err, stopped)
			}
			if err := tc.undo(ctx, 0); err != nil {
				t.Fatal(err)
			}
			t0 = time.Now()
			if err := b.Rejoin(ctx, 0); err != nil { // waits until the pair is whole
				t.Fatal(err)
			}
			t.Logf("whole again in %v", time.Since(t0))
			if got, want := docker.ReplicaAddr(b, 0), stopped; tc.name == "pause" && got != want {
				t.Fatalf("replica after the rejoin is %s, want the paused server %s", got, want)
			}
			if v, err := backendtest.Get(ctx, backendtest.NewClient(t, docker.ReplicaAddr(b, 0)), "k"); err != nil || v != "v" {
				t.Fatalf("the rejoined replica has k = %q, %v", v, err)
			}
		})
	}
}
