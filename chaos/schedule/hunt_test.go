package schedule

import (
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
