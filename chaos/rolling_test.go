package chaos_test

import (
	"slices"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/chaos"
	"github.com/fencedlock/fencedlock/chaos/checker"
	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/history"
)

// TestRollingRestarts runs the rolling profile on 3 process nodes, with
// and without redlock.WithReacquireOnExtend. With it, the long hold of
// client 0 rides through every restart: it is never lost, its extensions
// go on to the end of the run, each restart of a node is followed by a
// re-create of the hold's key there, and no safety property is broken, not
// even where a fault would excuse it. Without it, the hold is lost once a
// quorum of nodes has restarted (the second restart, of 3 nodes), and the
// loss is signalled; what the restarts break is theirs to explain.
func TestRollingRestarts(t *testing.T) {
	ttl, nodeTimeout := shortTiming(t, "process")
	// With the option the hold must last the 30 s that CI gives the
	// scenario (`make rolling` gives it 5 min); without it, the hold is
	// lost at the second restart, and 12 TTLs are room enough to see it.
	for _, tc := range []struct {
		lock     string
		survives bool
		duration time.Duration
	}{
		{chaos.LockFencedlockReacquire, true, 30 * time.Second},
		{chaos.LockFencedlock, false, 12 * ttl},
	} {
		t.Run(tc.lock, func(t *testing.T) {
			cfg := chaos.Config{
				Nodes: 3, Clients: 4, Duration: tc.duration, Profile: chaos.ProfileRolling, Lock: tc.lock, Seed: 1,
				TTL: ttl, NodeTimeout: nodeTimeout,
			}
			run, err := chaos.Run(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { keep(t, run) })
			checkRoundTrip(t, run.History, run.Result, cfg.CheckOptions())
			h, res := run.History, run.Result

			var restarts []history.Op
			for _, op := range h.Ops {
				if op.Kind == history.KindFault && op.Fault == fault.RestartWithoutData {
					if op.Outcome != history.OK {
						t.Fatalf("restart failed: %+v", op)
					}
					restarts = append(restarts, op)
				}
			}
			// Ops are numbered as they were invoked, but for faults, which
			// are recorded as they end.
			slices.SortFunc(restarts, func(a, b history.Op) int { return int(a.Invoke - b.Invoke) })
			if len(restarts) < cfg.Nodes+1 {
				t.Fatalf("%d restarts in %v (ttl %v), want every node restarted and one again", len(restarts), h.End, ttl)
			}
			long, ok := longHold(h)
			if !ok {
				t.Fatal("client 0 never held the key")
			}
			var exts []history.Op
			var lost *history.Op
			recreates := 0
			for _, op := range h.Ops {
				switch {
				case op.Hold != long.ID:
				case op.Kind == history.KindExtend && op.Outcome == history.OK:
					exts = append(exts, op)
					recreates += len(op.Reacquired)
				case op.Kind == history.KindLost:
					lost = &op
				}
			}
			t.Logf("ttl %v, node timeout %v: %d restarts, long hold %d (token %d): %d extensions recorded, %d re-creates, lost %v; verdict %s, found %+v, expected %+v",
				ttl, nodeTimeout, len(restarts), long.ID, long.Token, len(exts), recreates, lost != nil, res.Verdict, res.Found, res.Expected)
			for _, v := range res.Violations {
				t.Logf("  %s (expected %v, faults %v): %s", v.Property, v.Expected, v.Faults, v.Detail)
			}

			if !tc.survives {
				if lost == nil {
					t.Fatalf("the long hold was not lost across %d restarts without re-creates", len(restarts))
				}
				if lost.Invoke <= restarts[1].Invoke {
					t.Fatalf("the long hold was lost at %v, before the second restart (%v)", lost.Invoke, restarts[1].Invoke)
				}
				t.Logf("lost at %v, %v after the second restart began", lost.Invoke, lost.Invoke-restarts[1].Invoke)
				if res.Verdict == checker.VerdictViolated {
					t.Fatalf("verdict %s: %s", res.Verdict, res.Reason)
				}
				return
			}

			if lost != nil {
				t.Fatalf("the long hold was lost at %v", lost.Invoke)
			}
			if len(exts) == 0 {
				t.Fatal("no extension of the long hold recorded")
			}
			// The watchdog extends every third of a TTL and the workload
			// looks every quarter: a hold still extended at the end has a
			// recorded extension well within a few TTLs of it.
			if last := exts[len(exts)-1]; last.Complete < h.End-3*ttl {
				t.Fatalf("last extension recorded at %v, the run ended at %v", last.Complete, h.End)
			}
			// Each restart, but one too close to the end for an extension
			// to follow, is followed by the hold's key on its node again
			// before the node restarts: as the probes made after each
			// extension read it there. (Lock.Reacquired lists the re-creates
			// whose answers the client got: a re-create that landed but
			// whose reply was lost to the node timeout, on the connection
			// redialled after the restart, is on the node and in no list.)
			// And every node restarted shows a recorded re-create.
			recreated := map[int]bool{}
			for _, e := range exts {
				for _, n := range e.Reacquired {
					recreated[n] = true
				}
			}
			for i, r := range restarts {
				if r.Complete > h.End-2*ttl {
					continue
				}
				if !recreated[r.Node] {
					t.Errorf("node %d restarted at %v, and no extension recorded a re-create there", r.Node, r.Invoke)
				}
				next := h.End
				for _, s := range restarts[i+1:] {
					if s.Node == r.Node {
						next = s.Invoke
						break
					}
				}
				back := slices.ContainsFunc(h.Ops, func(p history.Op) bool {
					return p.Kind == history.KindProbe && p.Hold == long.ID && p.Node == r.Node && p.Outcome == history.OK &&
						p.Value == long.Value && p.Invoke > r.Complete && p.Complete < next
				})
				if !back {
					t.Errorf("node %d restarted at %v, and no probe found the hold's key there before %v", r.Node, r.Invoke, next)
				}
			}
			// The restarts took their turns.
			for i, r := range restarts {
				if r.Node != i%cfg.Nodes {
					t.Errorf("restart %d was of node %d", i, r.Node)
				}
			}
			if res.Verdict == checker.VerdictViolated {
				t.Errorf("verdict %s: %s", res.Verdict, res.Reason)
			}
			for _, v := range res.Violations {
				switch v.Property {
				case checker.MutualExclusion, checker.FencingOrder, checker.DuplicateTokens,
					checker.StaleWritesAccepted, checker.ResurrectedHold:
					t.Errorf("%s (expected %v): %s", v.Property, v.Expected, v.Detail)
				}
			}
		})
	}
}

// longHold returns client 0's first successful acquire: the rolling
// profile's long hold.
func longHold(h history.History) (history.Op, bool) {
	for _, op := range h.Ops {
		if op.Kind == history.KindAcquire && op.Client == 0 && op.Outcome == history.OK {
			return op, true
		}
	}
	return history.Op{}, false
}

// The rolling profile's schedule: restarts without data of each node in
// turn, a TTL, a third of one (the watchdog's period) and a node timeout
// apart, each counted from when the node before answered again.
func TestRollingSchedule(t *testing.T) {
	cfg := chaos.Config{Nodes: 3, Duration: 10 * time.Second, Profile: chaos.ProfileRolling,
		TTL: time.Second, NodeTimeout: 100 * time.Millisecond}
	p, err := chaos.Schedule(cfg)
	if err != nil {
		t.Fatal(err)
	}
	spacing := cfg.TTL + cfg.TTL/3 + cfg.NodeTimeout
	if p.MaxDown != 1 || len(p.Steps) != int(cfg.Duration/spacing)-1 {
		t.Fatalf("max down %d, %d steps, want 1 and %d", p.MaxDown, len(p.Steps), int(cfg.Duration/spacing)-1)
	}
	for i, s := range p.Steps {
		if s.Kind != fault.RestartWithoutData || s.Node != i%cfg.Nodes || s.At != time.Duration(i+1)*spacing || s.Settle != spacing {
			t.Errorf("step %d: %+v", i, s)
		}
	}
}
