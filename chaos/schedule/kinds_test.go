package schedule_test

import (
	"slices"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/chaos/backend"
	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/schedule"
)

// The kinds a plan draws from are the table's Scheduled ones, and a plan
// injects each of them; the hunt's, its Hunted ones, each drawn by a
// minute's hunt. A kind marked in the table but not injected here fails.
func TestKindsFollowTheTable(t *testing.T) {
	for _, k := range fault.Kinds() {
		if slices.Contains(backend.Kinds(), k) != k.Scheduled() || slices.Contains(schedule.HuntKinds(), k) != k.Hunted() {
			t.Errorf("%s: in Kinds() %v, in HuntKinds() %v; the table says scheduled %v, hunted %v", k,
				slices.Contains(backend.Kinds(), k), slices.Contains(schedule.HuntKinds(), k), k.Scheduled(), k.Hunted())
		}
	}
	for _, tc := range []struct {
		name  string
		kinds []fault.Kind
		plan  func(seed uint64) (schedule.Plan, error)
	}{
		{"plan", backend.Kinds(), func(seed uint64) (schedule.Plan, error) {
			return schedule.NewPlan(5, time.Minute, backend.Kinds(), seed, schedule.WithMaxTTL(time.Second))
		}},
		{"hunt", schedule.HuntKinds(), func(seed uint64) (schedule.Plan, error) {
			return schedule.NewHuntPlan(5, time.Minute, seed, schedule.WithMaxTTL(300*time.Millisecond))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := tc.plan(42)
			if err != nil {
				t.Fatal(err)
			}
			drawn := map[fault.Kind]bool{}
			for _, s := range p.Steps {
				drawn[s.Kind] = true
			}
			for _, w := range p.Windows {
				drawn[w.Kind] = true
			}
			for _, k := range tc.kinds {
				if !drawn[k] {
					t.Errorf("a minute's %s draws no %s: %v", tc.name, k, drawn)
				}
			}
			for k := range drawn {
				if !slices.Contains(tc.kinds, k) {
					t.Errorf("a %s drew %s, not one of its kinds %v", tc.name, k, tc.kinds)
				}
			}
		})
	}
}
