package main

import (
	"strings"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/internal/redistest"
)

// TestRunReportsUnreachable: a node that does not answer is named on
// stderr, also when the lock is acquired without it.
func TestRunReportsUnreachable(t *testing.T) {
	c := newCluster(t, 2)
	cases := []struct {
		name, node, why string
	}{
		{"no such host", "nosuchhost.invalid:6379", "nosuchhost.invalid:6379: unreachable: "},
		{"refused", closedAddr(t), ": unreachable: connection refused"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nodes := tc.node + "," + c.nodes()
			args := append([]string{"run", "--nodes", nodes, "--key", "job:reach", "--"}, helper(t, "env")...)
			r := call(t.Context(), args...)
			if r.code != exitOK {
				t.Fatalf("exit %d, want 0 (a quorum answered); stderr %q", r.code, r.stderr)
			}
			if !strings.Contains(r.stdout, "token=") {
				t.Errorf("the command did not run: stdout %q", r.stdout)
			}
			want := "fencedlock run: warning: node " + tc.node
			if !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, tc.why) {
				t.Errorf("stderr %q lacks %q and %q", r.stderr, want, tc.why)
			}
			if strings.Contains(r.stderr, "fault tolerant") {
				t.Errorf("three nodes drew the tolerance warning: %q", r.stderr)
			}
		})
	}
}

// TestFewNodesWarning: fewer than three nodes draw one line on stderr from
// run and status; three do not.
func TestFewNodesWarning(t *testing.T) {
	procs := redistest.StartN(t, 3)
	for _, n := range []int{1, 2, 3} {
		var addrs []string
		for _, p := range procs[:n] {
			addrs = append(addrs, p.Addr())
		}
		nodes := strings.Join(addrs, ",")
		for _, args := range [][]string{
			append([]string{"run", "--nodes", nodes, "--key", "job:few", "--"}, helper(t, "env")...),
			{"status", "--nodes", nodes, "--key", "job:few"},
		} {
			r := call(t.Context(), args...)
			want := exitOK
			if args[0] == "status" { // the key is free
				want = exitNotHeld
			}
			if r.code != want {
				t.Fatalf("%s on %d nodes: exit %d, want %d; stderr %q", args[0], n, r.code, want, r.stderr)
			}
			warned := strings.Count(r.stderr, "nothing is fault tolerant")
			if lines := strings.Count(r.stderr, "\n"); n < 3 && (warned != 1 || lines != 1) || n >= 3 && warned != 0 {
				t.Errorf("%s on %d nodes: stderr %q", args[0], n, r.stderr)
			}
		}
	}
}

// TestStatusReportsUnreachable: status names a node that does not answer
// on stderr, besides its row.
func TestStatusReportsUnreachable(t *testing.T) {
	c := newCluster(t, 3)
	_ = c.procs[0].Kill()
	r := call(t.Context(), "status", "--nodes", c.nodes(), "--key", "job:reach")
	if r.code != exitNotHeld { // two of three nodes say the key is free
		t.Fatalf("exit %d, want %d; stderr %q", r.code, exitNotHeld, r.stderr)
	}
	want := "fencedlock status: warning: node " + c.procs[0].Addr() + ": unreachable: connection refused"
	if !strings.Contains(r.stderr, want) {
		t.Errorf("stderr %q lacks %q", r.stderr, want)
	}
	if r.elapsed > 3*time.Second {
		t.Errorf("took %v: a dead node must fail fast", r.elapsed)
	}
}
