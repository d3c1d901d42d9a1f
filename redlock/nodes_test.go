package redlock_test

import (
	"slices"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/redlock"
)

// TestLockNodes checks that Nodes names a quorum of nodes that each hold the
// hold's value and a fence counter equal to its token: the grants at the
// highest counter, and the lagging ones raised to it.
func TestLockNodes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		prepare func(t *testing.T, r *rig, key string)
		want    func(nodes []int) bool // what else Nodes must say; nil: nothing
	}{
		{name: "healthy"},
		{
			// A node that is down grants nothing.
			name: "node down",
			prepare: func(t *testing.T, r *rig, _ string) {
				if err := r.procs[4].Kill(); err != nil {
					t.Fatal(err)
				}
			},
			want: func(nodes []int) bool { return !slices.Contains(nodes, 4) },
		},
		{
			// Node 0's counter is ahead: it alone is at the highest counter,
			// and the others must be raised to it to make a quorum. Nodes 3
			// and 4 are down, so that node 0's grant is one of the three a
			// quorum needs (up, it may answer after the others decided).
			name: "raised",
			prepare: func(t *testing.T, r *rig, key string) {
				if err := r.clients[0].Set(t.Context(), redlock.FenceKey(key), 1000, 0).Err(); err != nil {
					t.Fatal(err)
				}
				for _, i := range []int{3, 4} {
					if err := r.procs[i].Kill(); err != nil {
						t.Fatal(err)
					}
				}
			},
			want: func(nodes []int) bool { return slices.Equal(nodes, []int{0, 1, 2}) },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newRig(t, 5)
			c := r.client(t)
			const key = "nodes"
			if tc.prepare != nil {
				tc.prepare(t, r, key)
			}
			l, err := c.TryLock(t.Context(), key, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			nodes := l.Nodes()
			if len(nodes) < 3 || !slices.IsSorted(nodes) || len(slices.Compact(slices.Clone(nodes))) != len(nodes) {
				t.Fatalf("Nodes() = %v: want at least a quorum (3) of distinct nodes, ascending", nodes)
			}
			if tc.want != nil && !tc.want(nodes) {
				t.Errorf("Nodes() = %v", nodes)
			}
			for _, i := range nodes {
				v, err := r.clients[i].Get(t.Context(), key).Result()
				if err != nil || v != l.Value() {
					t.Errorf("node %d holds %q (%v), want the hold's value %q", i, v, err, l.Value())
				}
				n, err := r.clients[i].Get(t.Context(), redlock.FenceKey(key)).Uint64()
				if err != nil || n != l.Token() {
					t.Errorf("node %d's fence counter is %d (%v), want the token %d", i, n, err, l.Token())
				}
			}
			nodes[0] = -1 // the caller's copy
			if l.Nodes()[0] == -1 {
				t.Error("Nodes() returned the Lock's own slice")
			}
			if err := l.Unlock(t.Context()); err != nil {
				t.Fatal(err)
			}
		})
	}
}
