package schedule

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/fencedlock/fencedlock/chaos/backend"
	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/internal/faketime"
)

// Step is one fault of a Plan.
type Step struct {
	At    time.Duration // when to inject, from the start of the run
	For   time.Duration // how long to hold it before undo; for a fault with no undo, how long the node stays reserved
	Kind  fault.Kind
	Node  int
	Fault backend.Fault
	// Settle, for a fault with no undo (a restart), keeps its node
	// reserved for this long after Inject returned (the node answers
	// again), if that ends later than For: with MaxDown 1, the next step
	// starts no sooner, however long the restart took (NewRollingPlan).
	Settle time.Duration
	// Beyond marks a step of a fault planned on more nodes at once than
	// MaxDown allows (a majority failing over together): Run starts it
	// when its node is free and no node outside such a group is under a
	// fault (one still being undone, say), so the group is all that is
	// down, as planned.
	Beyond bool
}

// Plan is a fault schedule: what Run executes. NewPlan draws one; a Plan
// written by hand works as well, as long as Steps are sorted by At. Steps on
// one node must not overlap: Run would start the later one late.
type Plan struct {
	Seed     uint64
	Duration time.Duration
	MaxDown  int // nodes under a fault at once, at most (Run leaves out latency and clock drift); 0: no limit
	Steps    []Step
	// Windows are when client-side nemeses are armed: faults that act on
	// the clients' messages, which Run cannot inject (see Window).
	Windows []Window
}

// Window is a stretch of a run during which a fault that acts on the
// clients' messages (fault.DropHeal: heals sent are lost; fault.DelayHeal:
// heals sent are held until the window closes) is armed. The workload arms
// it; Run ignores it.
type Window struct {
	At, For time.Duration
	Kind    fault.Kind
}

// PlanOption configures NewPlan.
type PlanOption func(*planConfig)

type planConfig struct {
	maxDown          int
	failovers        bool // the hunt: a failover episode
	maxTTL           time.Duration
	holdMin, holdMax time.Duration
	gapMin, gapMax   time.Duration
	latency          time.Duration
	skews            []string
}

// WithMaxDown sets how many nodes may be under a fault at the same time.
// Default: a minority, (nodes-1)/2. Every kind counts, latency and clock
// skew included: a slow or skewed node is a faulty one, and NewPlan draws
// none on more nodes than that (Run, which keeps the limit in real time,
// lets tolerated faults that keep a node up pass: see Run). Raising it past a
// minority tests what happens when the algorithm's assumptions fail.
func WithMaxDown(n int) PlanOption { return func(c *planConfig) { c.maxDown = n } }

// WithFailovers adds to the hunt (NewHuntPlan) an episode that fails
// nodes over to their lagging replicas: one, then a majority at once. The
// nodes must each be a primary with a replica (fault.Failover). NewPlan
// draws failovers from its kinds instead.
func WithFailovers() PlanOption { return func(c *planConfig) { c.failovers = true } }

// WithMaxTTL sets the largest lock TTL of the workload: a delayed restart
// keeps its node down for 1.25 times it, a failover loses the writes of its
// last quarter. Required when the kinds include fault.DelayedRestart or
// fault.Failover.
func WithMaxTTL(d time.Duration) PlanOption { return func(c *planConfig) { c.maxTTL = d } }

// WithHold sets the range a held fault's duration is drawn from.
// Default 500ms to 2s.
func WithHold(lo, hi time.Duration) PlanOption {
	return func(c *planConfig) { c.holdMin, c.holdMax = lo, hi }
}

// WithGap sets the range the time between two fault starts is drawn from.
// Default 200ms to 1s.
func WithGap(lo, hi time.Duration) PlanOption {
	return func(c *planConfig) { c.gapMin, c.gapMax = lo, hi }
}

// WithLatency sets the round-trip delay of latency faults. Default 50ms.
func WithLatency(d time.Duration) PlanOption { return func(c *planConfig) { c.latency = d } }

// WithClockSkews sets the FAKETIME specs clock-skew faults draw from.
// Default "+0 x2" (a clock running twice as fast) and "+30s" (a jump ahead).
func WithClockSkews(specs ...string) PlanOption {
	return func(c *planConfig) { c.skews = append([]string(nil), specs...) }
}

// ErrInvalidPlan is wrapped by NewPlan's errors for bad arguments.
var ErrInvalidPlan = errors.New("schedule: invalid plan")

// NewPlan draws a fault schedule for nodes nodes over duration, from kinds,
// seeded by seed: the same arguments give the same Plan. Faults start at
// random gaps; each takes a node that has no fault at the time, and a fault
// is skipped when MaxDown nodes already have one. Every fault ends (its hold
// is over) by duration.
func NewPlan(nodes int, duration time.Duration, kinds []fault.Kind, seed uint64, opts ...PlanOption) (Plan, error) {
	cfg := planConfig{
		maxDown: (nodes - 1) / 2,
		holdMin: 500 * time.Millisecond, holdMax: 2 * time.Second,
		gapMin: 200 * time.Millisecond, gapMax: time.Second,
		latency: 50 * time.Millisecond,
		skews:   []string{"+0 x2", "+30s"},
	}
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.check(nodes, duration, kinds); err != nil {
		return Plan{}, err
	}
	p := Plan{Seed: seed, Duration: duration, MaxDown: cfg.maxDown}
	r := rand.New(rand.NewPCG(seed, 0x5eed_fa17))
	for at := between(r, cfg.gapMin, cfg.gapMax); at < duration; at += between(r, cfg.gapMin, cfg.gapMax) {
		kind := kinds[r.IntN(len(kinds))]
		hold := cfg.hold(r, kind)
		if at+hold > duration {
			if kind == fault.DelayedRestart {
				continue // it must stay down its full time
			}
			hold = duration - at
		}
		free := freeNodes(p.Steps, nodes, at)
		if nodes-len(free) >= cfg.maxDown || len(free) == 0 {
			continue
		}
		node := free[r.IntN(len(free))]
		p.Steps = append(p.Steps, Step{At: at, For: hold, Kind: kind, Node: node, Fault: cfg.faultFor(r, kind, node, hold)})
	}
	return p, nil
}

func (c *planConfig) check(nodes int, duration time.Duration, kinds []fault.Kind) error {
	switch {
	case nodes < 1:
		return fmt.Errorf("%w: %d nodes", ErrInvalidPlan, nodes)
	case duration <= 0:
		return fmt.Errorf("%w: duration %v", ErrInvalidPlan, duration)
	case len(kinds) == 0:
		return fmt.Errorf("%w: no fault kinds", ErrInvalidPlan)
	case c.maxDown < 0 || c.maxDown > nodes:
		return fmt.Errorf("%w: max down %d of %d nodes", ErrInvalidPlan, c.maxDown, nodes)
	case c.holdMin <= 0 || c.holdMax < c.holdMin:
		return fmt.Errorf("%w: hold %v to %v", ErrInvalidPlan, c.holdMin, c.holdMax)
	case c.gapMin <= 0 || c.gapMax < c.gapMin:
		return fmt.Errorf("%w: gap %v to %v", ErrInvalidPlan, c.gapMin, c.gapMax)
	case c.latency < 0:
		return fmt.Errorf("%w: latency %v", ErrInvalidPlan, c.latency)
	}
	for _, k := range kinds {
		switch k {
		case fault.Kill, fault.Restart, fault.RestartWithoutData, fault.Pause, fault.Partition, fault.Latency, fault.LoseReplies:
		case fault.DelayedRestart, fault.Failover:
			if c.maxTTL <= 0 {
				return fmt.Errorf("%w: %s needs WithMaxTTL", ErrInvalidPlan, k)
			}
		case fault.ClockSkew:
			if len(c.skews) == 0 {
				return fmt.Errorf("%w: %s needs at least one spec", ErrInvalidPlan, k)
			}
			for _, s := range c.skews {
				if s == "" {
					return fmt.Errorf("%w: empty clock skew spec", ErrInvalidPlan)
				}
				if err := faketime.CheckSpec(s); err != nil {
					return fmt.Errorf("%w: %w", ErrInvalidPlan, err)
				}
			}
		default:
			return fmt.Errorf("%w: %q is not a kind a plan injects (want one of %s)", ErrInvalidPlan, k, fault.Join(backend.Kinds()))
		}
	}
	return nil
}

// hold is how long a fault of kind lasts (or, for a restart, how long its
// node stays reserved).
func (c *planConfig) hold(r *rand.Rand, kind fault.Kind) time.Duration {
	switch kind {
	case fault.DelayedRestart:
		return c.maxTTL + c.maxTTL/4
	case fault.Restart, fault.RestartWithoutData:
		return c.holdMin
	}
	return between(r, c.holdMin, c.holdMax)
}

func (c *planConfig) faultFor(r *rand.Rand, kind fault.Kind, node int, hold time.Duration) backend.Fault {
	switch kind {
	case fault.Kill:
		return backend.Kill{Node: node}
	case fault.Restart:
		return backend.Restart{Node: node, WithData: true}
	case fault.RestartWithoutData:
		return backend.Restart{Node: node}
	case fault.DelayedRestart:
		return backend.DelayedRestart{Node: node, Down: hold}
	case fault.Pause:
		return backend.Pause{Node: node}
	case fault.Partition:
		return backend.Partition{Node: node}
	case fault.LoseReplies:
		return backend.LoseReplies{Node: node}
	case fault.Latency:
		return backend.Latency{Node: node, D: c.latency}
	case fault.ClockSkew:
		return backend.ClockSkew{Node: node, Spec: c.skews[r.IntN(len(c.skews))]}
	case fault.Failover:
		// The writes of the last quarter TTL are lost: grants still valid
		// when the replica is promoted, about half a TTL later.
		return backend.Failover{Node: node, Lag: c.maxTTL / 4}
	}
	panic("backend: fault kind not checked: " + string(kind))
}

// freeNodes returns the nodes that no step holds at time at. Steps start in
// order, so a later step never starts before at.
func freeNodes(steps []Step, nodes int, at time.Duration) []int {
	busy := make([]bool, nodes)
	for _, s := range steps {
		if s.At+s.For > at {
			busy[s.Node] = true
		}
	}
	var free []int
	for n, b := range busy {
		if !b {
			free = append(free, n)
		}
	}
	return free
}

// between draws uniformly from [lo, hi].
func between(r *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(r.Int64N(int64(hi-lo)+1))
}
