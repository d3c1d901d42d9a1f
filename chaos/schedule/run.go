package schedule

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fencedlock/fencedlock/chaos/backend"
	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/clock"
)

// FaultEvent is one fault as it happened, for the run's history.
type FaultEvent struct {
	Kind  fault.Kind
	Node  int
	Fault backend.Fault // the injected value: its fields say how (which latency, which clock)
	Start time.Time     // when Inject was called
	End   time.Time     // when undo returned, or Inject for a fault with no undo
	Err   error         // from Inject or undo; nil if the fault was applied and ended cleanly
}

// RunOption configures Run.
type RunOption func(*runConfig)

type runConfig struct {
	clock   clock.Clock
	cleanup time.Duration
}

// WithClock sets the clock Run waits on and stamps FaultEvents with (the
// history's clock, say). Default clock.Real().
func WithClock(c clock.Clock) RunOption { return func(rc *runConfig) { rc.clock = c } }

// WithCleanupTimeout bounds the undo of the faults still held when ctx ends.
// Default 10s.
func WithCleanupTimeout(d time.Duration) RunOption {
	return func(rc *runConfig) { rc.cleanup = d }
}

// Run executes p against b: it injects each step at its time, holds it for
// its For, and undoes it, with steps on different nodes overlapping as
// planned. Run keeps the plan's promises in real time, where a slow restart
// or undo can run past its planned end: a step waits until its node is free
// of the step before it, and until fewer than p.MaxDown nodes are under a
// fault (MaxDown 0: no limit), so it may start late, never early. Faults
// that keep their node up and break no assumption (latency, a clock drift
// within the allowance: see countsDown) do not count toward MaxDown: a lock
// must bear them on every node at once. A step
// with no undo (a restart) keeps its node for its For all the same.
//
// Steps with a Settle (a rolling restart) claim their nodes in plan order.
//
// record (if not nil) gets one FaultEvent per fault when it is over; calls
// to record are serialised. Run returns when every started step is over. A
// step that fails does not stop the run: Run returns the failures joined.
// When ctx ends, no new fault starts, the held faults are undone at once
// (each undo bounded by the cleanup timeout), and ctx.Err() is among the
// errors returned.
func Run(ctx context.Context, b backend.Backend, p Plan, record func(FaultEvent), opts ...RunOption) error {
	rc := runConfig{clock: clock.Real(), cleanup: 10 * time.Second}
	for _, o := range opts {
		o(&rc)
	}
	r := &runner{b: b, rc: rc, record: record, maxDown: p.MaxDown, busy: map[int]bool{}, beyond: map[int]bool{}, freed: make(chan struct{})}
	origin := rc.clock.Now()
	var wg sync.WaitGroup
	var ctxErr error
	var prev chan struct{} // closed once the last step with a Settle has claimed its node (or given up)
	for _, s := range p.Steps {
		if err := rc.clock.Sleep(ctx, s.At-rc.clock.Since(origin)); err != nil {
			ctxErr = err
			break
		}
		var after, claimed chan struct{}
		if s.Settle > 0 {
			after, claimed = prev, make(chan struct{})
			prev = claimed
		}
		wg.Go(func() { r.step(ctx, s, after, claimed) })
	}
	wg.Wait()
	if ctxErr == nil {
		ctxErr = ctx.Err()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return errors.Join(append(r.errs, ctxErr)...)
}

type runner struct {
	b       backend.Backend
	rc      runConfig
	record  func(FaultEvent)
	maxDown int

	mu   sync.Mutex // protects errs, busy, freed; serialises record
	errs []error
	busy map[int]bool // nodes under a fault -> whether it counts toward maxDown
	// beyond marks the busy nodes of steps planned beyond maxDown.
	beyond map[int]bool
	freed  chan struct{} // closed and replaced when a node is freed
}

// step runs s. A step with a Settle waits, before it claims its node,
// until the one before it with a Settle has claimed its own (after), and
// closes claimed once it has (or gave up): steps that run late queue for
// the MaxDown in plan order, so that a rolling restart keeps its turn.
func (r *runner) step(ctx context.Context, s Step, after <-chan struct{}, claimed chan struct{}) {
	err := ctx.Err()
	if after != nil && err == nil {
		select {
		case <-after:
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	if err == nil {
		err = r.claim(ctx, s.Node, countsDown(s.Kind), s.Beyond)
	}
	if claimed != nil {
		close(claimed)
	}
	if err != nil {
		return // the run ended before this fault could start
	}
	defer r.free(s.Node)
	clk := r.rc.clock
	ev := FaultEvent{Kind: s.Kind, Node: s.Node, Fault: s.Fault, Start: clk.Now()}
	undo, err := s.Fault.Inject(ctx, r.b)
	if err != nil || undo == nil {
		ev.End, ev.Err = clk.Now(), err
		r.report(s, ev)
		if err == nil { // over already (a restart): keep the node for the rest of its hold
			_ = clk.Sleep(ctx, max(s.For-clk.Since(ev.Start), s.Settle-clk.Since(ev.End)))
		}
		return
	}
	uctx := ctx
	if clk.Sleep(ctx, s.For-clk.Since(ev.Start)) != nil {
		// The run is over: undo now, on a context of its own.
		var cancel context.CancelFunc
		uctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), r.rc.cleanup)
		defer cancel()
	}
	ev.Err = undo(uctx)
	ev.End = clk.Now()
	r.report(s, ev)
}

// claim waits until node is free and, if down, until fewer than maxDown
// nodes are under a fault that counts — or, for a step planned beyond
// MaxDown (its group is the fault the plan has then), until no node outside
// such a group is — and marks node busy.
func (r *runner) claim(ctx context.Context, node int, down, beyond bool) error {
	for {
		r.mu.Lock()
		_, busy := r.busy[node]
		var room bool
		switch {
		case !down || r.maxDown <= 0:
			room = true
		case beyond:
			room = r.downLocked() == r.beyondLocked()
		default:
			room = r.downLocked() < r.maxDown
		}
		if !busy && room {
			if beyond {
				r.beyond[node] = true
			}
			r.busy[node] = down
			r.mu.Unlock()
			return nil
		}
		freed := r.freed
		r.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// beyondLocked counts the busy nodes of steps planned beyond MaxDown.
func (r *runner) beyondLocked() int {
	n := 0
	for node := range r.beyond {
		if r.busy[node] {
			n++
		}
	}
	return n
}

// downLocked counts the busy nodes that count toward maxDown.
func (r *runner) downLocked() int {
	n := 0
	for _, down := range r.busy {
		if down {
			n++
		}
	}
	return n
}

// countsDown reports whether a fault of kind counts toward a plan's
// MaxDown: every kind but those that keep their node serving and break no
// assumption (a kind this package does not know counts).
func countsDown(kind fault.Kind) bool {
	return !kind.Known() || kind.TakesNodeDown() || kind.BreaksAssumptions() || kind.ClientSide()
}

func (r *runner) free(node int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.busy, node)
	delete(r.beyond, node)
	close(r.freed)
	r.freed = make(chan struct{})
}

func (r *runner) report(s Step, ev FaultEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ev.Err != nil {
		r.errs = append(r.errs, fmt.Errorf("backend: %s on node %d at %v: %w", s.Kind, s.Node, s.At, ev.Err))
	}
	if r.record != nil {
		r.record(ev)
	}
}
