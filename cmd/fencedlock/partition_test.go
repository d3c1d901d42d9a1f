package main

import (
	"strings"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/redlocktest"
)

// TestRunLockLostToAPartition: a majority of nodes cut off from fencedlock
// (running, but unreachable) fails the extensions as dead nodes do: the
// command is killed at the supervisor's deadline, and the message names the
// nodes whose calls failed.
func TestRunLockLostToAPartition(t *testing.T) {
	const ttl = 3 * time.Second // as TestRunLockLost: a TTL a loaded machine can extend
	nodes := redlocktest.Nodes(t, 3)
	argv, started := blockingChild(t, false)
	args := append([]string{"run", "--nodes", strings.Join(nodes.Addrs(), ","), "--key", "job:partition",
		"--ttl", ttl.String(), "--"}, argv...)
	ch := start(t.Context(), args...)
	pid := started()
	for _, n := range nodes[:2] {
		n.Partition()
	}
	cut := time.Now()
	r := await(t, ch, 15*time.Second)
	if r.code != exitLockLost {
		t.Fatalf("exit %d, want %d; stderr %q", r.code, exitLockLost, r.stderr)
	}
	// As TestRunLockLost: the deadline comes at most 4/5 of the ttl after
	// the last extension, which began before the cut; a second for the load.
	if d, bound := time.Since(cut), ttl+time.Second; d > bound {
		t.Errorf("the command was stopped %v after the partition, want within %v", d, bound)
	}
	for _, w := range []string{"lost while the command ran: extensions failed", "the command was killed (SIGKILL)",
		"node " + nodes[0].Addr() + ": ", "node " + nodes[1].Addr() + ": "} {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("stderr %q lacks %q", r.stderr, w)
		}
	}
	if !gone(pid) {
		t.Errorf("the command (pid %d) still runs", pid)
	}
}
