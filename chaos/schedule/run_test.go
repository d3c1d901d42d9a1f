package schedule_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/chaos/backend"
	"github.com/fencedlock/fencedlock/chaos/backend/backendtest"
	"github.com/fencedlock/fencedlock/chaos/backend/process/processtest"
	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/internal/testenv"
	"github.com/fencedlock/fencedlock/chaos/schedule"
	"github.com/fencedlock/fencedlock/clock"
)

func TestRunFollowsThePlan(t *testing.T) {
	epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := clock.NewFake(epoch)
	b := &backendtest.Recording{N: 3}
	p := schedule.Plan{Duration: 4 * time.Second, MaxDown: 3, Steps: []schedule.Step{
		{At: time.Second, For: 2 * time.Second, Kind: fault.Kill, Node: 0, Fault: backend.Kill{Node: 0}},
		{At: 1500 * time.Millisecond, For: time.Second, Kind: fault.Partition, Node: 1, Fault: backend.Partition{Node: 1}},
		{At: 2 * time.Second, For: time.Second, Kind: fault.Restart, Node: 2, Fault: backend.Restart{Node: 2, WithData: true}},
	}}
	events := make(chan schedule.FaultEvent, len(p.Steps))
	done := make(chan error, 1)
	go func() {
		done <- schedule.Run(t.Context(), b, p, func(e schedule.FaultEvent) { events <- e }, schedule.WithClock(f))
	}()

	block := func(n int) {
		t.Helper()
		if err := f.BlockUntilContext(t.Context(), n); err != nil {
			t.Fatal(err)
		}
	}
	next := func(want fault.Kind) schedule.FaultEvent {
		t.Helper()
		e := <-events
		if e.Kind != want {
			t.Fatalf("event %v, want kind %s", e, want)
		}
		return e
	}
	block(1) // waiting for the first step
	if got := b.Took(); len(got) != 0 {
		t.Fatalf("calls before the first step: %q", got)
	}
	f.Advance(time.Second) // 1s: kill 0, held until 3s
	block(2)
	f.Advance(500 * time.Millisecond) // 1.5s: partition 1, held until 2.5s
	block(3)
	f.Advance(500 * time.Millisecond) // 2s: restart 2, over at once
	restart := next(fault.Restart)
	f.Advance(500 * time.Millisecond) // 2.5s: heal 1
	partition := next(fault.Partition)
	f.Advance(500 * time.Millisecond) // 3s: start 0
	kill := next(fault.Kill)
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}

	want := []string{"kill 0", "partition 1", "restart 2 true", "heal 1", "start 0"}
	if got := b.Took(); !slices.Equal(got, want) {
		t.Fatalf("calls %q, want %q", got, want)
	}
	for _, tc := range []struct {
		e          schedule.FaultEvent
		node       int
		start, end time.Duration
	}{
		{kill, 0, time.Second, 3 * time.Second},
		{partition, 1, 1500 * time.Millisecond, 2500 * time.Millisecond},
		{restart, 2, 2 * time.Second, 2 * time.Second},
	} {
		if tc.e.Node != tc.node || tc.e.Err != nil ||
			!tc.e.Start.Equal(epoch.Add(tc.start)) || !tc.e.End.Equal(epoch.Add(tc.end)) {
			t.Errorf("event %+v, want node %d from %v to %v", tc.e, tc.node, tc.start, tc.end)
		}
	}
}

func TestRunUndoesHeldFaultsWhenCtxEnds(t *testing.T) {
	f := clock.NewFake(time.Unix(0, 0))
	b := &backendtest.Recording{N: 3}
	p := schedule.Plan{Duration: 2 * time.Hour, MaxDown: 2, Steps: []schedule.Step{
		{At: 0, For: time.Hour, Kind: fault.Kill, Node: 0, Fault: backend.Kill{Node: 0}},
		{At: 10 * time.Minute, For: time.Minute, Kind: fault.Pause, Node: 1, Fault: backend.Pause{Node: 1}},
	}}
	ctx, cancel := context.WithCancel(t.Context())
	var events []schedule.FaultEvent
	done := make(chan error, 1)
	go func() {
		done <- schedule.Run(ctx, b, p, func(e schedule.FaultEvent) { events = append(events, e) }, schedule.WithClock(f))
	}()
	if err := f.BlockUntilContext(t.Context(), 2); err != nil { // kill held, next step waiting
		t.Fatal(err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	if got, want := b.Took(), []string{"kill 0", "start 0"}; !slices.Equal(got, want) {
		t.Fatalf("calls %q, want %q", got, want)
	}
	if len(events) != 1 || events[0].Kind != fault.Kill || events[0].Err != nil {
		t.Fatalf("events %+v, want the kill, undone cleanly", events)
	}
}

func TestRunReportsFailuresAndGoesOn(t *testing.T) {
	boom := errors.New("boom")
	b := &backendtest.Recording{N: 3, Fail: map[string]error{"kill": boom}}
	var steps []schedule.Step
	for i := range 3 { // all at once: record must still be called one at a time
		steps = append(steps,
			schedule.Step{Kind: fault.Kill, Node: i, Fault: backend.Kill{Node: i}},
			schedule.Step{Kind: fault.Latency, Node: i, Fault: backend.Latency{Node: i, D: time.Millisecond}})
	}
	var events []schedule.FaultEvent // no lock: Run serialises record
	err := schedule.Run(t.Context(), b, schedule.Plan{Duration: time.Second, MaxDown: 3, Steps: steps},
		func(e schedule.FaultEvent) { events = append(events, e) })
	if !errors.Is(err, boom) || errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want the kill failures only", err)
	}
	if len(events) != len(steps) {
		t.Fatalf("%d events for %d steps", len(events), len(steps))
	}
	for _, e := range events {
		if (e.Kind == fault.Kill) != errors.Is(e.Err, boom) {
			t.Errorf("event %+v", e)
		}
	}
	if n := len(b.Took()); n != 3+6 { // 3 failed kills, 3 latencies set and removed
		t.Fatalf("%d calls: %q", n, b.Took())
	}
}

// TestRunAgainstProcess runs a drawn plan with every kind on real nodes and
// checks that every fault was applied and undone cleanly.
func TestRunAgainstProcess(t *testing.T) {
	kinds := []fault.Kind{
		fault.Kill, fault.Restart, fault.RestartWithoutData, fault.DelayedRestart,
		fault.Pause, fault.Partition, fault.Latency,
	}
	if backendtest.HasFaketime() {
		kinds = append(kinds, fault.ClockSkew)
	} else if testenv.CI() {
		t.Fatal("CI=true: libfaketime is not installed, and the clock skew of this plan would not run")
	}
	p, err := schedule.NewPlan(3, 1500*time.Millisecond, kinds, 38, // a seed that draws 7 kinds
		schedule.WithMaxTTL(150*time.Millisecond),
		schedule.WithHold(100*time.Millisecond, 250*time.Millisecond),
		schedule.WithGap(30*time.Millisecond, 100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Steps) < 4 {
		t.Fatalf("plan has %d steps; pick a seed with more", len(p.Steps))
	}
	b := processtest.New(t, 3)

	// A workload on every node while the faults come and go, so that the
	// proxies change state with bytes in flight (for the race detector and
	// goleak as much as for anything else).
	wctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	var ok atomic.Int64
	for _, n := range b.Nodes() {
		c := backendtest.NewClient(t, n.Addr())
		wg.Go(func() {
			pace := time.NewTicker(time.Millisecond) // no busy loop on a dead node
			defer pace.Stop()
			for i := 0; ; i++ {
				if c.Set(wctx, "k", i, 0).Err() == nil {
					ok.Add(1)
				}
				select {
				case <-wctx.Done():
					return
				case <-pace.C:
				}
			}
		})
	}

	var events []schedule.FaultEvent
	err = schedule.Run(t.Context(), b, p, func(e schedule.FaultEvent) { events = append(events, e) })
	stop()
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if ok.Load() == 0 {
		t.Fatal("the workload never got through")
	}
	if len(events) != len(p.Steps) {
		t.Fatalf("%d events for %d steps", len(events), len(p.Steps))
	}
	seen := map[fault.Kind]int{}
	for _, e := range events {
		seen[e.Kind]++
		if e.End.Before(e.Start) {
			t.Errorf("event %+v ends before it starts", e)
		}
	}
	t.Logf("%d faults: %v; %d writes got through", len(events), seen, ok.Load())
	for i, n := range b.Nodes() {
		if err := backendtest.NewClient(t, n.Addr()).Ping(t.Context()).Err(); err != nil {
			t.Errorf("node %d after the run: %v", i, err)
		}
	}
}

// slowUndo is a fault whose undo blocks until release is closed; every
// Inject and undo is logged, and an Inject while another slowUndo fault is
// active is logged as an overlap.
type slowUndo struct {
	name    string
	release chan struct{}
	undoing chan struct{} // closed when undo starts
	l       *faultLog
}

type faultLog struct {
	mu     sync.Mutex // protects events, active
	events []string
	active int
}

func (l *faultLog) add(e string, delta int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if delta > 0 && l.active > 0 {
		e += " (overlapping)"
	}
	l.active += delta
	l.events = append(l.events, e)
}

func (f slowUndo) Inject(context.Context, backend.Backend) (func(context.Context) error, error) {
	f.l.add("inject "+f.name, 1)
	return func(context.Context) error {
		close(f.undoing)
		<-f.release
		f.l.add("undone "+f.name, -1)
		return nil
	}, nil
}

// TestRunKeepsLimitsWhenUndoIsLate: a step whose planned start comes while
// the fault before it is still being undone waits for it, whether it shares
// the node or would push the number of faulty nodes past MaxDown.
func TestRunKeepsLimitsWhenUndoIsLate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		nodeB   int
		maxDown int
	}{
		{"same node", 0, 3},
		{"max down", 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := clock.NewFake(time.Unix(0, 0))
			l := &faultLog{}
			a := slowUndo{"a", make(chan struct{}), make(chan struct{}), l}
			b := slowUndo{"b", make(chan struct{}), make(chan struct{}), l}
			close(b.release)
			p := schedule.Plan{Duration: time.Hour, MaxDown: tc.maxDown, Steps: []schedule.Step{
				{At: 0, For: time.Second, Node: 0, Fault: a},
				{At: time.Second, For: time.Second, Node: tc.nodeB, Fault: b},
				{At: time.Minute, For: time.Second, Node: 2, Fault: backend.Latency{Node: 2}},
			}}
			done := make(chan error, 1)
			go func() { done <- schedule.Run(t.Context(), &backendtest.Recording{N: 3}, p, nil, schedule.WithClock(f)) }()
			if err := f.BlockUntilContext(t.Context(), 2); err != nil { // a held, main loop waiting for b
				t.Fatal(err)
			}
			f.Advance(time.Second) // a's hold ends as b's start comes
			<-a.undoing
			// The main loop has launched b once it waits for the third step.
			if err := f.BlockUntilContext(t.Context(), 1); err != nil {
				t.Fatal(err)
			}
			// Give b every chance to start too early: a runner that does not
			// wait shows it as an overlap in the log. (A correct one passes
			// however the goroutines are scheduled.)
			for range 100 {
				runtime.Gosched()
			}
			close(a.release)
			if err := f.BlockUntilContext(t.Context(), 2); err != nil { // b held, main loop waiting
				t.Fatal(err)
			}
			f.Advance(time.Minute) // b undone, the third step held
			if err := f.BlockUntilContext(t.Context(), 1); err != nil {
				t.Fatal(err)
			}
			f.Advance(time.Second)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			want := []string{"inject a", "undone a", "inject b", "undone b"}
			if !slices.Equal(l.events, want) {
				t.Fatalf("events %q, want %q", l.events, want)
			}
		})
	}
}

// TestRunLetsToleratedUpFaultsPastMaxDown: latency and a clock drift within
// the allowance keep their nodes serving and break no assumption, so they
// reach a majority even with MaxDown a minority; a partition waits for room.
func TestRunLetsToleratedUpFaultsPastMaxDown(t *testing.T) {
	f := clock.NewFake(time.Unix(0, 0))
	b := &backendtest.Recording{N: 5}
	p := schedule.Plan{Duration: time.Hour, MaxDown: 1, Steps: []schedule.Step{
		{At: 0, For: time.Minute, Kind: fault.Partition, Node: 0, Fault: backend.Partition{Node: 0}},
		{At: time.Second, For: time.Minute, Kind: fault.Latency, Node: 1, Fault: backend.Latency{Node: 1, D: time.Millisecond}},
		{At: time.Second, For: time.Minute, Kind: fault.ClockDrift, Node: 2, Fault: backend.ClockSkew{Node: 2, Spec: schedule.DriftSpec}},
		{At: time.Second, For: time.Minute, Kind: fault.Partition, Node: 3, Fault: backend.Partition{Node: 3}},
	}}
	done := make(chan error, 1)
	go func() { done <- schedule.Run(t.Context(), b, p, nil, schedule.WithClock(f)) }()
	if err := f.BlockUntilContext(t.Context(), 2); err != nil { // partition 0 held, main loop waiting
		t.Fatal(err)
	}
	f.Advance(time.Second)
	// Partition 0 and the latency and drift are held (3 sleepers); the second
	// partition waits for room, not on the clock.
	if err := f.BlockUntilContext(t.Context(), 3); err != nil {
		t.Fatal(err)
	}
	for range 100 {
		runtime.Gosched()
	}
	want := []string{"partition 0", "latency 1 1ms", `skew 2 "+0 x1.01"`}
	got := b.Took()
	slices.Sort(got[1:])
	if !slices.Equal(got, want) {
		t.Fatalf("calls %q, want %q", got, want)
	}
	f.Advance(time.Minute) // all three undone; the partition of 3 starts
	if err := f.BlockUntilContext(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	f.Advance(time.Minute)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := b.Took(); !slices.Contains(got, "partition 3") || slices.Index(got, "partition 3") < slices.Index(got, "heal 0") {
		t.Fatalf("partition 3 did not wait for node 0's heal: %q", got)
	}
}

// Steps planned beyond MaxDown (a majority failing over together) start
// at once, however many nodes are down: the others wait for room.
func TestRunStartsStepsPlannedBeyondMaxDown(t *testing.T) {
	f := clock.NewFake(time.Unix(0, 0))
	b := &backendtest.Recording{N: 5}
	p := schedule.Plan{Duration: time.Hour, MaxDown: 1, Steps: []schedule.Step{
		{At: 0, For: time.Minute, Kind: fault.Partition, Node: 0, Fault: backend.Partition{Node: 0}, Beyond: true},
		{At: 0, For: time.Minute, Kind: fault.Partition, Node: 1, Fault: backend.Partition{Node: 1}, Beyond: true},
		{At: 0, For: time.Minute, Kind: fault.Partition, Node: 2, Fault: backend.Partition{Node: 2}, Beyond: true},
		{At: time.Second, For: time.Minute, Kind: fault.Partition, Node: 3, Fault: backend.Partition{Node: 3}},
	}}
	done := make(chan error, 1)
	go func() { done <- schedule.Run(t.Context(), b, p, nil, schedule.WithClock(f)) }()
	bctx, cancel := context.WithTimeout(t.Context(), 10*time.Second) // a bound on a Run that holds fewer
	defer cancel()
	if err := f.BlockUntilContext(bctx, 4); err != nil { // three held, the main loop waiting
		t.Fatalf("%v: calls %q", err, b.Took())
	}
	got := b.Took()
	slices.Sort(got)
	if want := []string{"partition 0", "partition 1", "partition 2"}; !slices.Equal(got, want) {
		t.Fatalf("calls %q, want %q: the steps planned beyond MaxDown all held at once", got, want)
	}
	f.Advance(time.Second) // node 3's step is due, and waits for room
	for range 100 {
		runtime.Gosched()
	}
	if slices.Contains(b.Took(), "partition 3") {
		t.Fatalf("partition 3 started with three nodes down and MaxDown 1: %q", b.Took())
	}
	f.Advance(time.Minute)
	if err := f.BlockUntilContext(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	f.Advance(time.Minute)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := b.Took(); slices.Index(got, "partition 3") < slices.Index(got, "heal 0") {
		t.Fatalf("partition 3 did not wait for the others' heals: %q", got)
	}
}

// TestRunKeepsABeyondGroupToItsPlannedSize: a majority planned to fail
// over at once (steps Beyond MaxDown) is what the plan puts down then, and
// nothing else. When the step before it on another node is still being
// undone at the group's start (a slow restart, say), Run must not start
// the group on top of it: the plan never had more than the group's nodes
// under a fault, and Run "keeps the plan's promises in real time". With
// three of five nodes failing over and a fourth still faulty, no quorum
// is left at all.
func TestRunKeepsABeyondGroupToItsPlannedSize(t *testing.T) {
	f := clock.NewFake(time.Unix(0, 0))
	l := &faultLog{}
	a := slowUndo{"a", make(chan struct{}), make(chan struct{}), l}
	steps := []schedule.Step{{At: 0, For: time.Second, Node: 4, Fault: a}}
	for n := range 3 {
		g := slowUndo{fmt.Sprintf("group %d", n), make(chan struct{}), make(chan struct{}), l}
		close(g.release)
		steps = append(steps, schedule.Step{At: time.Second, For: time.Second, Node: n, Fault: g, Beyond: true})
	}
	p := schedule.Plan{Duration: time.Hour, MaxDown: 2, Steps: steps}
	done := make(chan error, 1)
	go func() { done <- schedule.Run(t.Context(), &backendtest.Recording{N: 5}, p, nil, schedule.WithClock(f)) }()
	if err := f.BlockUntilContext(t.Context(), 2); err != nil { // a held, main loop waiting for the group
		t.Fatal(err)
	}
	f.Advance(time.Second) // a's hold ends as the group's start comes
	<-a.undoing
	// Give the group every chance to start too early: a runner that
	// starts it holds its three faults (three timers) at once; a correct
	// one waits out this bound, then passes.
	bctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	_ = f.BlockUntilContext(bctx, 3)
	close(a.release)
	if err := f.BlockUntilContext(t.Context(), 3); err != nil { // the group held
		t.Fatal(err)
	}
	f.Advance(time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	first := slices.IndexFunc(l.events, func(e string) bool { return strings.HasPrefix(e, "inject group") })
	if first < slices.Index(l.events, "undone a") {
		t.Fatalf("the group started while node 4 was still under its fault (four of five nodes at once, the plan has three): %q", l.events)
	}
}
