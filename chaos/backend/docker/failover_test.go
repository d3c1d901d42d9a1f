package docker_test

import (
	"errors"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/chaos/backend"
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

// On a replicated node the container operations are unsupported, and
// FailOver on a plain backend too.
func TestDockerReplicatedUnsupported(t *testing.T) {
	plain := newDockerBackend(t, 1)
	if err := plain.FailOver(t.Context(), 0, 0); !errors.Is(err, backend.ErrUnsupported) {
		t.Errorf("FailOver without replicas: %v, want ErrUnsupported", err)
	}
	if err := plain.FailOver(t.Context(), 0, -time.Second); err == nil {
		t.Error("FailOver with a negative lag accepted")
	}
}
