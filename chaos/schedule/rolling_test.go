package schedule_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/chaos/backend"
	"github.com/fencedlock/fencedlock/chaos/backend/backendtest"
	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/schedule"
	"github.com/fencedlock/fencedlock/clock"
)

// A rolling plan restarts the nodes without their data in turn, one at a
// time, spacing apart, each kept for spacing after it answered again; the
// last one leaves spacing before the end.
func TestNewRollingPlan(t *testing.T) {
	const spacing = 1500 * time.Millisecond
	p, err := schedule.NewRollingPlan(3, 10*time.Second, spacing, 1)
	if err != nil {
		t.Fatal(err)
	}
	if p.MaxDown != 1 || len(p.Steps) != 5 { // at 1.5s, 3s, 4.5s, 6s, 7.5s: 9s+1.5s > 10s
		t.Fatalf("max down %d, %d steps: %+v", p.MaxDown, len(p.Steps), p.Steps)
	}
	for i, s := range p.Steps {
		if s.At != time.Duration(i+1)*spacing || s.Settle != spacing || s.Node != i%3 ||
			s.Kind != fault.RestartWithoutData || s.Fault != (backend.Restart{Node: i % 3}) {
			t.Errorf("step %d: %+v", i, s)
		}
	}
	for _, bad := range []struct {
		nodes             int
		duration, spacing time.Duration
	}{{0, time.Second, time.Second}, {3, 0, time.Second}, {3, time.Second, 0}} {
		if _, err := schedule.NewRollingPlan(bad.nodes, bad.duration, bad.spacing, 1); err == nil {
			t.Errorf("NewRollingPlan(%d, %v, %v): no error", bad.nodes, bad.duration, bad.spacing)
		}
	}
}

// slowRestart is a restart that takes d on the fake clock before its node
// answers again.
type slowRestart struct {
	f *clock.Fake
	d time.Duration
}

func (r slowRestart) Inject(context.Context, backend.Backend) (func(context.Context) error, error) {
	r.f.Advance(r.d)
	return nil, nil
}

// Step.Settle counts from when the restart returned: a slow restart puts
// the next step (MaxDown 1) off by what it took, past its planned start.
func TestRunSettlesAfterARestart(t *testing.T) {
	epoch := time.Unix(0, 0)
	f := clock.NewFake(epoch)
	slow := slowRestart{f, 400 * time.Millisecond}
	p := schedule.Plan{Duration: time.Minute, MaxDown: 1, Steps: []schedule.Step{
		{At: time.Second, Settle: time.Second, Kind: fault.RestartWithoutData, Node: 0, Fault: slow},
		{At: 2 * time.Second, Settle: time.Second, Kind: fault.RestartWithoutData, Node: 1, Fault: slow},
	}}
	events := make(chan schedule.FaultEvent, len(p.Steps))
	done := make(chan error, 1)
	go func() {
		done <- schedule.Run(t.Context(), &backendtest.Recording{N: 2}, p, func(e schedule.FaultEvent) { events <- e }, schedule.WithClock(f))
	}()
	block := func(n int) {
		t.Helper()
		if err := f.BlockUntilContext(t.Context(), n); err != nil {
			t.Fatal(err)
		}
	}
	block(1)
	f.Advance(time.Second) // 1s: the first restart, answering at 1.4s
	first := <-events
	block(2)                          // it settles until 2.4s; the main loop waits for 2s
	f.Advance(600 * time.Millisecond) // 2s: the second is due, and waits for the node before
	block(1)
	select {
	case e := <-events:
		t.Fatalf("second restart at %v, before the first settled", e.Start.Sub(epoch))
	default:
	}
	f.Advance(400 * time.Millisecond) // 2.4s
	second := <-events
	block(1)
	f.Advance(time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		e          schedule.FaultEvent
		start, end time.Duration
	}{{first, time.Second, 1400 * time.Millisecond}, {second, 2400 * time.Millisecond, 2800 * time.Millisecond}} {
		if !tc.e.Start.Equal(epoch.Add(tc.start)) || !tc.e.End.Equal(epoch.Add(tc.end)) {
			t.Errorf("restart of node %d from %v to %v, want from %v to %v",
				tc.e.Node, tc.e.Start.Sub(epoch), tc.e.End.Sub(epoch), tc.start, tc.end)
		}
	}
}

// Steps with a Settle that are due together (a rolling restart running
// late) start in plan order, one after another.
func TestRunKeepsTheTurnOfSettlingSteps(t *testing.T) {
	f := clock.NewFake(time.Unix(0, 0))
	quick := slowRestart{f, 0}
	var steps []schedule.Step
	for i := range 4 {
		n := i % 3
		steps = append(steps, schedule.Step{At: time.Second, Settle: time.Second,
			Kind: fault.RestartWithoutData, Node: n, Fault: quick})
	}
	events := make(chan schedule.FaultEvent, len(steps))
	done := make(chan error, 1)
	go func() {
		done <- schedule.Run(t.Context(), &backendtest.Recording{N: 3}, schedule.Plan{Duration: time.Minute, MaxDown: 1, Steps: steps},
			func(e schedule.FaultEvent) { events <- e }, schedule.WithClock(f))
	}()
	block := func(n int) {
		t.Helper()
		if err := f.BlockUntilContext(t.Context(), n); err != nil {
			t.Fatal(err)
		}
	}
	block(1)
	f.Advance(time.Second) // every step due at once
	var nodes []int
	for range steps {
		e := <-events
		nodes = append(nodes, e.Node)
		block(1) // the restart settles
		f.Advance(time.Second)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if want := []int{0, 1, 2, 0}; !slices.Equal(nodes, want) {
		t.Fatalf("restarts of nodes %v, want %v", nodes, want)
	}
}
