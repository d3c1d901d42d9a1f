package schedule_test

import (
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/chaos/backend"
	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/schedule"
)

func TestPlanIsDeterministic(t *testing.T) {
	mk := func(seed uint64) schedule.Plan {
		p, err := schedule.NewPlan(5, 20*time.Second, backend.Kinds(), seed, schedule.WithMaxTTL(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b := mk(42), mk(42)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("two plans for seed 42 differ:\n%v\n%v", a.Steps, b.Steps)
	}
	if len(a.Steps) == 0 {
		t.Fatal("a 20s plan with every kind has no steps")
	}
	if reflect.DeepEqual(a.Steps, mk(43).Steps) {
		t.Fatal("seeds 42 and 43 give the same plan")
	}
}

// checkPlan verifies the invariants every plan keeps.
func checkPlan(t *testing.T, p schedule.Plan, nodes int, kinds []fault.Kind, maxTTL time.Duration) (peak int) {
	t.Helper()
	for i, s := range p.Steps {
		if i > 0 && s.At < p.Steps[i-1].At {
			t.Fatalf("seed %d: steps out of order at %d", p.Seed, i)
		}
		if s.At < 0 || s.For <= 0 || s.At+s.For > p.Duration {
			t.Fatalf("seed %d: step %d [%v, +%v] outside [0, %v]", p.Seed, i, s.At, s.For, p.Duration)
		}
		if s.Node < 0 || s.Node >= nodes {
			t.Fatalf("seed %d: step %d on node %d", p.Seed, i, s.Node)
		}
		if !slices.Contains(kinds, s.Kind) {
			t.Fatalf("seed %d: step %d of kind %s, not asked for", p.Seed, i, s.Kind)
		}
		if got := reflect.ValueOf(s.Fault).FieldByName("Node").Int(); int(got) != s.Node {
			t.Fatalf("seed %d: step %d on node %d, its fault on %d", p.Seed, i, s.Node, got)
		}
		if d, ok := s.Fault.(backend.DelayedRestart); ok {
			if d.Down <= maxTTL || s.For < d.Down || d.WithData {
				t.Fatalf("seed %d: delayed restart down %v, held %v, max TTL %v, with data %v", p.Seed, d.Down, s.For, maxTTL, d.WithData)
			}
		}
		// Faults active when s starts, s included.
		active := 0
		for _, o := range p.Steps[:i+1] {
			if o.At+o.For > s.At {
				active++
				if o.Node == s.Node && o != s {
					t.Fatalf("seed %d: two faults on node %d at %v", p.Seed, s.Node, s.At)
				}
			}
		}
		if active > p.MaxDown {
			t.Fatalf("seed %d: %d faults at %v, max %d", p.Seed, active, s.At, p.MaxDown)
		}
		peak = max(peak, active)
	}
	return peak
}

func TestPlanNeverExceedsMaxDown(t *testing.T) {
	const maxTTL = 800 * time.Millisecond
	for _, tc := range []struct {
		name    string
		nodes   int
		maxDown int // 0: the default
		want    int // the limit
	}{
		{"3 nodes default", 3, 0, 1},
		{"5 nodes default", 5, 0, 2},
		{"5 nodes max 1", 5, 1, 1},
		{"5 nodes max 4", 5, 4, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := []schedule.PlanOption{schedule.WithMaxTTL(maxTTL), schedule.WithGap(50*time.Millisecond, 300*time.Millisecond)}
			if tc.maxDown > 0 {
				opts = append(opts, schedule.WithMaxDown(tc.maxDown))
			}
			peak := 0
			for seed := range uint64(200) {
				p, err := schedule.NewPlan(tc.nodes, 15*time.Second, backend.Kinds(), seed, opts...)
				if err != nil {
					t.Fatal(err)
				}
				if p.MaxDown != tc.want {
					t.Fatalf("MaxDown = %d, want %d", p.MaxDown, tc.want)
				}
				peak = max(peak, checkPlan(t, p, tc.nodes, backend.Kinds(), maxTTL))
			}
			if peak != tc.want {
				t.Fatalf("peak concurrent faults over 200 seeds = %d, want the limit %d reached", peak, tc.want)
			}
		})
	}
}

func TestPlanOptions(t *testing.T) {
	kinds := []fault.Kind{fault.Latency, fault.ClockSkew}
	p, err := schedule.NewPlan(3, 10*time.Second, kinds, 7,
		schedule.WithLatency(123*time.Millisecond), schedule.WithClockSkews("+5s"),
		schedule.WithHold(time.Second, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	checkPlan(t, p, 3, kinds, 0)
	for _, s := range p.Steps {
		switch f := s.Fault.(type) {
		case backend.Latency:
			if f.D != 123*time.Millisecond {
				t.Errorf("latency %v", f.D)
			}
		case backend.ClockSkew:
			if f.Spec != "+5s" {
				t.Errorf("skew %q", f.Spec)
			}
		default:
			t.Errorf("fault %T not asked for", f)
		}
		if s.For != time.Second && s.At+s.For != p.Duration {
			t.Errorf("hold %v, want 1s", s.For)
		}
	}
}

func TestPlanWithoutRoomHasNoSteps(t *testing.T) {
	for _, nodes := range []int{1, 2} { // a minority of 1 or 2 nodes is 0
		p, err := schedule.NewPlan(nodes, 10*time.Second, []fault.Kind{fault.Kill}, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Steps) != 0 {
			t.Errorf("%d nodes: %d steps, want none", nodes, len(p.Steps))
		}
	}
}

func TestPlanBadArguments(t *testing.T) {
	all := backend.Kinds()
	for _, tc := range []struct {
		name  string
		nodes int
		d     time.Duration
		kinds []fault.Kind
		opts  []schedule.PlanOption
	}{
		{"no nodes", 0, time.Second, all[:1], nil},
		{"no duration", 3, 0, all[:1], nil},
		{"no kinds", 3, time.Second, nil, nil},
		{"unknown kind", 3, time.Second, []fault.Kind{"flood"}, nil},
		{"delayed restart without max TTL", 3, time.Second, []fault.Kind{fault.DelayedRestart}, nil},
		{"max down above nodes", 3, time.Second, all[:1], []schedule.PlanOption{schedule.WithMaxDown(4)}},
		{"negative max down", 3, time.Second, all[:1], []schedule.PlanOption{schedule.WithMaxDown(-1)}},
		{"hold range reversed", 3, time.Second, all[:1], []schedule.PlanOption{schedule.WithHold(2*time.Second, time.Second)}},
		{"zero gap", 3, time.Second, all[:1], []schedule.PlanOption{schedule.WithGap(0, time.Second)}},
		{"negative latency", 3, time.Second, all[:1], []schedule.PlanOption{schedule.WithLatency(-time.Second)}},
		{"no skews", 3, time.Second, []fault.Kind{fault.ClockSkew}, []schedule.PlanOption{schedule.WithClockSkews()}},
		{"bad skew", 3, time.Second, []fault.Kind{fault.ClockSkew}, []schedule.PlanOption{schedule.WithClockSkews("soon")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := schedule.NewPlan(tc.nodes, tc.d, tc.kinds, 1, tc.opts...); !errors.Is(err, schedule.ErrInvalidPlan) {
				t.Fatalf("err = %v, want ErrInvalidPlan", err)
			}
		})
	}
}

// A plan draws failovers when asked for them, each losing the writes of a
// quarter of the largest TTL, and refuses them without that TTL.
func TestPlanDrawsFailover(t *testing.T) {
	const maxTTL = time.Second
	p, err := schedule.NewPlan(3, 20*time.Second, []fault.Kind{fault.Failover}, 1, schedule.WithMaxTTL(maxTTL))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Steps) == 0 {
		t.Fatal("a 20s plan of failovers has no steps")
	}
	for _, s := range p.Steps {
		if f, ok := s.Fault.(backend.Failover); s.Kind != fault.Failover || !ok || f.Node != s.Node || f.Lag != maxTTL/4 {
			t.Fatalf("step %+v", s)
		}
	}
	if _, err := schedule.NewPlan(3, 20*time.Second, []fault.Kind{fault.Failover}, 1); !errors.Is(err, schedule.ErrInvalidPlan) {
		t.Fatalf("failover without a max TTL: %v, want ErrInvalidPlan", err)
	}
}
