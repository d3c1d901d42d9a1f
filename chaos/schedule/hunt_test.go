package schedule

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/chaos/fault"
)

// TestHuntSeparatesBreakingEpisodes: between two episodes that break an
// assumption there is always a tolerated one, so that a violation in it is
// judged. Episodes are told apart by their steps' kinds.
func TestHuntSeparatesBreakingEpisodes(t *testing.T) {
	const ttl = time.Second
	for _, seed := range []uint64{1, 2, 3, 4, 5, 6, 7, 8} {
		t.Run("seed", func(t *testing.T) {
			p, err := NewHuntPlan(5, 10*time.Minute, seed, WithMaxTTL(ttl))
			if err != nil {
				t.Fatal(err)
			}
			// A breaking episode's steps, in the plan's order, with
			// nothing tolerated between them but latency-free gaps.
			var last fault.Kind
			for i, s := range p.Steps {
				breaking := s.Kind.BreaksAssumptions()
				if i > 0 && breaking && last.BreaksAssumptions() && last != s.Kind {
					t.Fatalf("seed %d: step %d (%s at %v) follows a %s step with no tolerated one between", seed, i, s.Kind, s.At, last)
				}
				last = s.Kind
			}
		})
	}
}

func TestSeparate(t *testing.T) {
	cases := []struct {
		name  string
		in    []bool
		broke bool
	}{
		{"already apart", []bool{true, false, true, false, false}, false},
		{"adjacent", []bool{false, true, true, false, false}, false},
		{"after the cycle before", []bool{true, false, false, false}, true},
		{"a tail of two", []bool{false, false, false, false, true, true}, false},
		{"all at the start", []bool{true, true, false, false, false, false}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			order := separate(len(tc.in), tc.broke, func(i int) bool { return tc.in[i] })
			if got := slices.Sorted(slices.Values(order)); !slices.Equal(got, []int{0, 1, 2, 3, 4, 5}[:len(tc.in)]) {
				t.Fatalf("order %v is not a permutation of %d episodes", order, len(tc.in))
			}
			prev := tc.broke
			for _, i := range order {
				if tc.in[i] && prev {
					t.Fatalf("order %v of %v (broke %v): two breaking episodes in a row", order, tc.in, tc.broke)
				}
				prev = tc.in[i]
			}
		})
	}
}

// TestHuntHasLaggingRestarts: the tolerated episode that makes counters lag
// (a minority killed and started again with its data, then one more node
// cut off) is in the plan, and keeps the nodes it takes down a minority.
func TestHuntHasLaggingRestarts(t *testing.T) {
	p, err := NewHuntPlan(5, 10*time.Minute, 1, WithMaxTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	kills := 0
	for i, s := range p.Steps {
		if s.Kind != fault.Kill || i+1 >= len(p.Steps) || p.Steps[i+1].Kind != fault.Kill {
			continue
		}
		kills++
		if next := p.Steps[i+2]; next.Kind != fault.Partition || next.At != s.At+s.For {
			t.Errorf("the kills at %v are not followed by a cut at their end: %+v", s.At, next)
		}
	}
	if kills == 0 {
		t.Fatal("no minority killed together: no lagging restarts")
	}
}

// TestHuntFailovers: with WithFailovers each cycle fails one node over,
// then a majority at once (steps planned beyond MaxDown); without it the
// hunt has no failover.
func TestHuntFailovers(t *testing.T) {
	for _, tc := range []struct {
		nodes int
		opts  []PlanOption
		want  bool
	}{
		{5, []PlanOption{WithMaxTTL(time.Second), WithFailovers()}, true},
		{3, []PlanOption{WithMaxTTL(time.Second), WithFailovers()}, true},
		{5, []PlanOption{WithMaxTTL(time.Second)}, false},
	} {
		t.Run(fmt.Sprintf("%d nodes, failovers %v", tc.nodes, tc.want), func(t *testing.T) {
			p, err := NewHuntPlan(tc.nodes, 10*time.Minute, 1, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			byAt := map[time.Duration][]Step{}
			var ats []time.Duration
			for _, s := range p.Steps {
				if s.Kind != fault.Failover {
					continue
				}
				if len(byAt[s.At]) == 0 {
					ats = append(ats, s.At)
				}
				byAt[s.At] = append(byAt[s.At], s)
			}
			if !tc.want {
				if len(ats) != 0 {
					t.Fatalf("%d failovers without WithFailovers", len(ats))
				}
				return
			}
			q := tc.nodes/2 + 1
			singles, majorities := 0, 0
			for _, at := range ats {
				group := byAt[at]
				switch len(group) {
				case 1:
					if group[0].Beyond {
						t.Errorf("a lone failover at %v is planned beyond MaxDown", at)
					}
					singles++
				case q:
					nodes := map[int]bool{}
					for _, s := range group {
						nodes[s.Node] = true
						if !s.Beyond || s.For != group[0].For {
							t.Errorf("failover of node %d at %v: beyond %v, for %v; want beyond MaxDown, held like the others", s.Node, at, s.Beyond, s.For)
						}
					}
					if len(nodes) != q {
						t.Errorf("the majority at %v fails over nodes %v, want %d distinct", at, nodes, q)
					}
					majorities++
				default:
					t.Errorf("%d failovers at %v: want one, or a majority (%d)", len(group), at, q)
				}
			}
			if singles == 0 || majorities == 0 || singles != majorities {
				t.Fatalf("%d lone failovers and %d majorities: want one of each per episode", singles, majorities)
			}
		})
	}
}
