package fault_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/fencedlock/fencedlock/chaos/fault"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []fault.Kind
		wantErr bool
	}{
		{"kill", []fault.Kind{fault.Kill}, false},
		{"kill, pause,kill ,latency", []fault.Kind{fault.Kill, fault.Pause, fault.Latency}, false},
		{"restart-without-data,client-pause,kill-during-acquire",
			[]fault.Kind{fault.RestartWithoutData, fault.ClientPause, fault.KillDuringAcquire}, false},
		{"", nil, false},
		{" , ", nil, false},
		{"kill,explode", nil, true},
		{"Kill", nil, true},
	} {
		got, err := fault.Parse(tc.in)
		if tc.wantErr {
			if !errors.Is(err, fault.ErrUnknown) {
				t.Errorf("Parse(%q) = %v, %v; want ErrUnknown", tc.in, got, err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("Parse(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	if got, err := fault.Parse(fault.Join(fault.Kinds())); err != nil || !slices.Equal(got, fault.Kinds()) {
		t.Errorf("Parse(Join(Kinds())) = %v, %v", got, err)
	}
}

// The table is the one source: every kind is either tolerated or breaks an
// assumption, client faults never take a node down, and an unknown kind has
// no traits.
func TestTraits(t *testing.T) {
	all := fault.Kinds()
	if got := append(fault.Tolerated(), fault.AssumptionBreaking()...); len(got) != len(all) {
		t.Fatalf("tolerated + assumption-breaking = %v, want a split of %v", got, all)
	}
	for _, k := range all {
		if k.ClientSide() && k.TakesNodeDown() {
			t.Errorf("%s: a client fault takes a node down", k)
		}
		if slices.Contains(fault.Tolerated(), k) == k.BreaksAssumptions() {
			t.Errorf("%s: in Tolerated() = %v, BreaksAssumptions() = %v", k, !k.BreaksAssumptions(), k.BreaksAssumptions())
		}
	}
	want := []fault.Kind{fault.ClientPause, fault.ClientClockSkew, fault.ClockSkew, fault.RestartWithoutData, fault.LateWrite, fault.Failover}
	if got := fault.AssumptionBreaking(); !sameSet(got, want) {
		t.Errorf("AssumptionBreaking() = %v, want %v", got, want)
	}
	for _, k := range all {
		if want := k == fault.RestartWithoutData || k == fault.DelayedRestart || k == fault.Failover; k.LosesData() != want {
			t.Errorf("%s: LosesData() = %v", k, k.LosesData())
		}
		if want := k == fault.Failover; k.NeedsReplicas() != want {
			t.Errorf("%s: NeedsReplicas() = %v", k, k.NeedsReplicas())
		}
		// What needs replicas breaks an assumption: no default list of
		// tolerated kinds, which every backend runs, may hold it.
		if k.NeedsReplicas() && slices.Contains(fault.Tolerated(), k) {
			t.Errorf("%s needs replicas and is tolerated", k)
		}
	}
	if k := fault.Kind("meteor"); k.Known() || k.ClientSide() || k.TakesNodeDown() || k.BreaksAssumptions() || k.LosesData() || k.NeedsReplicas() {
		t.Errorf("unknown kind has traits")
	}
}

func sameSet(a, b []fault.Kind) bool {
	return len(a) == len(b) && !slices.ContainsFunc(a, func(k fault.Kind) bool { return !slices.Contains(b, k) })
}
