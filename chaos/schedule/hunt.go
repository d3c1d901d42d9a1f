package schedule

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/fencedlock/fencedlock/chaos/backend"
	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/internal/faketime"
)

// An episode of the hunt is a short sequence of steps that builds one state
// a lock protocol gets wrong, on nodes drawn from the seed. NewHuntPlan
// strings episodes together; each returns its steps from at on and the time
// it ends.
type episode func(h *hunt, at time.Duration) ([]Step, []Window, time.Duration)

// Episodes of the hunt, in the order of the cycle before the seed shuffles
// it. The overlapping majorities come twice a cycle: they are what exposes
// a token taken from a minority of counters; so do the late heals, which
// need a few acquisitions at the right moment. breaks marks the episodes
// whose faults break an assumption of the lock: the shuffle never puts two
// of them one after the other (see separate), so that what a tolerated
// episode shows is judged, not excused by the aftermath of a breaking one.
var huntCycle = []struct {
	run    episode
	breaks bool
}{
	{(*hunt).overlappingMajorities, false},
	{(*hunt).amnesiaRotation, true},
	{(*hunt).lostReplies, false},
	{(*hunt).overlappingMajorities, false},
	{(*hunt).restarts, false},
	{(*hunt).clockJumps, true},
	{(*hunt).lateHeals, false},
	{(*hunt).slowMajority, false},
	{(*hunt).lateHeals, false},
	{(*hunt).driftingMajority, false},
	{(*hunt).laggingRestarts, false},
}

// HuntKinds returns the fault kinds of NewHuntPlan's steps and windows:
// those of package fault that are Hunted, in its order.
func HuntKinds() []fault.Kind {
	return slices.DeleteFunc(fault.Kinds(), func(k fault.Kind) bool { return !k.Hunted() })
}

type hunt struct {
	r     *rand.Rand
	nodes int
	ttl   time.Duration
	skews []string
}

// failoverEpisode is the episode WithFailovers adds to each cycle.
var failoverEpisode = struct {
	run    episode
	breaks bool
}{(*hunt).failovers, true}

// failovers fails one node over to its lagging replica, and, once it is a
// pair again and the workload settled, a majority of nodes at once: a
// failover loses the grants and counter increments of the last quarter TTL
// (see schedule.Plan's faultFor), which on a minority the quorum bears
// (with replica acknowledgements, on a majority too), and on a majority
// without them can hand a key, or a token, out twice.
func (h *hunt) failovers(at time.Duration) ([]Step, []Window, time.Duration) {
	q := h.nodes/2 + 1
	order := h.perm()
	lag := h.ttl / 4
	hold := h.between(h.ttl, 2*h.ttl)
	steps := []Step{{At: at, For: hold, Kind: fault.Failover, Node: order[0], Fault: backend.Failover{Node: order[0], Lag: lag}}}
	at += hold + h.between(h.ttl/2, h.ttl)
	hold = h.between(h.ttl, 2*h.ttl)
	for _, n := range order[:q] {
		steps = append(steps, Step{At: at, For: hold, Kind: fault.Failover, Node: n, Fault: backend.Failover{Node: n, Lag: lag}, Beyond: true})
	}
	return steps, nil, at + hold
}

// NewHuntPlan draws the schedule of the hunt profile: episodes that build
// on purpose the states where lock protocols break, one after another, in a
// seeded order on seeded nodes, until duration:
//
//   - overlapping majorities: clients see one majority, then another that
//     shares a single node with it, then every node but that one (for 5
//     nodes, {0,1,2} then {2,3,4} then {0,1,3,4}, permuted): fence counters
//     diverge between majorities, and a token taken from the shared node
//     alone is not on any majority of the last view;
//   - amnesia rotation: a majority of nodes restart without their data one
//     after another, acquisitions in between;
//   - lost replies: a node applies requests whose replies are dropped;
//   - restarts: nodes restart with their data, or are killed and started
//     again, under long auto-extended holds;
//   - clock jumps: a node's clock jumps forward, then (on another restart)
//     back;
//   - late heals: the heals clients send to lagging counters arrive a TTL
//     late, after the counters they lift have moved on (see lateHeals);
//   - a slow majority: short bursts of latency on a majority, so that an
//     acquisition takes a good part of the drift allowance and more, and the
//     next one, after the burst, is fast (see slowMajority);
//   - a drifting majority: the clocks of a majority run fast, within the
//     lock's drift allowance (see driftingMajority);
//   - lagging restarts: a minority is killed and comes back with its data,
//     its counters behind, while another node is cut off (see
//     laggingRestarts);
//   - failovers, with WithFailovers only: one node fails over to its
//     lagging replica, then a majority at once (see failovers).
//
// No two episodes that break an assumption of the lock (amnesia, clock
// jumps, failovers) come one after the other: a tolerated one is always between.
//
// Every episode keeps the nodes that are down, or break an assumption, to a
// minority at a time; latency and a drift within the allowance, which a lock
// must bear everywhere, reach a majority. WithMaxTTL
// is required (episodes last a few TTLs, so that holds and expiries happen
// inside them); WithClockSkews sets the jumps (default "+30s" and "-30s").
// The same arguments give the same Plan.
func NewHuntPlan(nodes int, duration time.Duration, seed uint64, opts ...PlanOption) (Plan, error) {
	cfg := planConfig{skews: []string{"+30s", "-30s"}}
	for _, o := range opts {
		o(&cfg)
	}
	switch {
	case nodes < 3:
		return Plan{}, fmt.Errorf("%w: the hunt needs at least 3 nodes, not %d", ErrInvalidPlan, nodes)
	case duration <= 0:
		return Plan{}, fmt.Errorf("%w: duration %v", ErrInvalidPlan, duration)
	case cfg.maxTTL <= 0:
		return Plan{}, fmt.Errorf("%w: the hunt needs WithMaxTTL", ErrInvalidPlan)
	case len(cfg.skews) < 2:
		return Plan{}, fmt.Errorf("%w: the hunt's clock jumps need two specs (forward, back)", ErrInvalidPlan)
	}
	for _, s := range cfg.skews {
		if err := faketime.CheckSpec(s); err != nil {
			return Plan{}, fmt.Errorf("%w: %w", ErrInvalidPlan, err)
		}
	}
	h := &hunt{r: rand.New(rand.NewPCG(seed, 0x4a_4e7)), nodes: nodes, ttl: cfg.maxTTL, skews: cfg.skews}
	p := Plan{Seed: seed, Duration: duration, MaxDown: (nodes - 1) / 2}
	at := h.between(h.ttl/2, h.ttl)
	broke := false // the episode before broke an assumption
	for {
		cycle := slices.Clone(huntCycle)
		if cfg.failovers {
			cycle = append(cycle, failoverEpisode)
		}
		h.r.Shuffle(len(cycle), func(i, j int) { cycle[i], cycle[j] = cycle[j], cycle[i] })
		for _, i := range separate(len(cycle), broke, func(i int) bool { return cycle[i].breaks }) {
			ep := cycle[i]
			broke = ep.breaks
			steps, windows, end := ep.run(h, at)
			if end > duration {
				return p, nil
			}
			p.Steps = append(p.Steps, steps...)
			p.Windows = append(p.Windows, windows...)
			at = end + h.between(h.ttl/2, h.ttl) // the workload settles between episodes
		}
	}
}

// separate returns an order of a shuffled cycle of n episodes in which no
// two that break an assumption (breaks) come one after the other, nor the
// first after one that broke (broke): it keeps the shuffled order, putting
// off each breaking episode that would follow another until after the next
// tolerated one, and slots any left over at the end between two tolerated
// ones (there are always such: a cycle has more than twice as many
// tolerated episodes as breaking ones).
func separate(n int, broke bool, breaks func(i int) bool) []int {
	var out, later []int
	prev := broke
	for i := range n {
		if breaks(i) && prev {
			later = append(later, i)
			continue
		}
		out = append(out, i)
		prev = breaks(i)
		if !prev && len(later) > 0 {
			out, later, prev = append(out, later[0]), later[1:], true
		}
	}
	for _, b := range later {
		for j := 1; j < len(out); j++ {
			if !breaks(out[j-1]) && !breaks(out[j]) {
				out = slices.Insert(out, j, b)
				break
			}
		}
	}
	return out
}

func (h *hunt) between(lo, hi time.Duration) time.Duration { return between(h.r, lo, hi) }

// perm is a fresh seeded order of the nodes.
func (h *hunt) perm() []int { return h.r.Perm(h.nodes) }

// overlappingMajorities: with q = nodes/2+1 and nodes in a seeded order,
// majority A is the first q nodes and B the last q; they share 2q-nodes
// nodes (one, for an odd count). Clients see B (the rest partitioned) long
// enough for many acquisitions, then A, then every node but the shared ones:
// each view is a majority, and each partition a minority. From the second
// view on, the heals that clients send to lagging counters are lost
// (fault.DropHeal): only the raise, which a token must not do without,
// brings a lagging counter up.
func (h *hunt) overlappingMajorities(at time.Duration) ([]Step, []Window, time.Duration) {
	q := h.nodes/2 + 1
	order := h.perm()
	onlyA := order[:h.nodes-q]     // in A, not B
	shared := order[h.nodes-q : q] // in both
	onlyB := order[q:]             // in B, not A
	views := []struct {
		cut []int
		d   time.Duration
	}{
		{onlyA, h.between(h.ttl, 3*h.ttl/2)},    // clients see B: its counters move ahead
		{onlyB, h.between(3*h.ttl/2, 2*h.ttl)},  // see A: the shared nodes lead, the others lag
		{shared, h.between(3*h.ttl/2, 2*h.ttl)}, // see all but the shared nodes
	}
	var steps []Step
	var heals Window
	for i, v := range views {
		for _, n := range v.cut {
			steps = append(steps, Step{At: at, For: v.d, Kind: fault.Partition, Node: n, Fault: backend.Partition{Node: n}})
		}
		if i == 1 {
			heals = Window{At: at, Kind: fault.DropHeal}
		}
		at += v.d
	}
	heals.For = at - heals.At
	return steps, []Window{heals}, at
}

// amnesiaRotation restarts a majority of the nodes without their data, one
// after another, with time for acquisitions between two restarts.
func (h *hunt) amnesiaRotation(at time.Duration) ([]Step, []Window, time.Duration) {
	var steps []Step
	for _, n := range h.perm()[:h.nodes/2+1] {
		gap := h.between(h.ttl/2, h.ttl)
		steps = append(steps, Step{At: at, For: gap, Kind: fault.RestartWithoutData, Node: n, Fault: backend.Restart{Node: n}})
		at += gap
	}
	return steps, nil, at
}

// lostReplies drops a node's replies, then another's, while it applies what
// it is sent.
func (h *hunt) lostReplies(at time.Duration) ([]Step, []Window, time.Duration) {
	var steps []Step
	for _, n := range h.perm()[:2] {
		d := h.between(h.ttl/2, h.ttl)
		steps = append(steps, Step{At: at, For: d, Kind: fault.LoseReplies, Node: n, Fault: backend.LoseReplies{Node: n}})
		at += d
	}
	return steps, nil, at
}

// restarts restarts one node with its data and kills another, held down
// for a while, then started again: auto-extended holds must ride through.
func (h *hunt) restarts(at time.Duration) ([]Step, []Window, time.Duration) {
	order := h.perm()
	gap := h.between(h.ttl/2, h.ttl)
	down := h.between(h.ttl/2, h.ttl)
	steps := []Step{
		{At: at, For: gap, Kind: fault.Restart, Node: order[0], Fault: backend.Restart{Node: order[0], WithData: true}},
		{At: at + gap, For: down, Kind: fault.Kill, Node: order[1], Fault: backend.Kill{Node: order[1]}},
	}
	return steps, nil, at + gap + down
}

// clockJumps moves one node's clock forward, then back, each held a while.
func (h *hunt) clockJumps(at time.Duration) ([]Step, []Window, time.Duration) {
	n := h.perm()[0]
	var steps []Step
	for _, spec := range h.skews[:2] {
		d := h.between(h.ttl, 2*h.ttl)
		steps = append(steps, Step{At: at, For: d, Kind: fault.ClockSkew, Node: n, Fault: backend.ClockSkew{Node: n, Spec: spec}})
		at += d
	}
	return steps, nil, at
}

// lateHeals builds the state where a heal that lowers a counter hands out
// an issued token again. With q = nodes/2+1 and nodes in a seeded order, L
// is the first nodes-q (a minority), s the next one and R the rest (L and s
// make a majority, and so do L and R):
//
//  1. L is cut off: its counters fall behind;
//  2. every node is seen again; the heals sent to L's counters now are held
//     back (fault.DelayHeal), and L stays behind;
//  3. R is cut off: acquisitions raise L to s's counter, and L and s move
//     on together; just before the end the held heals land;
//  4. s is cut off: clients see L and R.
//
// A heal that sets the counter rather than raising it puts L back below
// tokens issued in step 3 (R never saw them), and step 4 draws them again.
// A heal that only raises does nothing.
func (h *hunt) lateHeals(at time.Duration) ([]Step, []Window, time.Duration) {
	q := h.nodes/2 + 1
	order := h.perm()
	lagging, shared, rest := order[:h.nodes-q], order[h.nodes-q:q], order[q:]
	var steps []Step
	cut := func(nodes []int, d time.Duration) {
		for _, n := range nodes {
			steps = append(steps, Step{At: at, For: d, Kind: fault.Partition, Node: n, Fault: backend.Partition{Node: n}})
		}
		at += d
	}
	cut(lagging, h.between(h.ttl, 3*h.ttl/2))
	heals := Window{At: at, Kind: fault.DelayHeal}
	at += h.between(h.ttl, 3*h.ttl/2)
	cut(rest, h.between(2*h.ttl, 5*h.ttl/2)) // long: the workload's holds are, and L, s must move on
	// The heals land a fiftieth of a TTL before the view changes: late
	// enough that an acquisition rarely comes in between to raise L again.
	heals.For = at - h.ttl/50 - heals.At
	cut(shared, h.between(h.ttl, 3*h.ttl/2))
	return steps, []Window{heals}, at
}

// laggingRestarts builds lagging fence counters with faults the lock
// tolerates only: with q = nodes/2+1 and nodes in a seeded order, a
// minority L (the first nodes-q) is killed while acquisitions move the
// others' counters on, and started again with its data, its counters
// behind; at once one of the others, s, is cut off, so that every quorum of
// the view mixes L's lagging counters with the others' current ones: the
// raise (which a token must not do without) and the heals (which are let
// through) run, under tolerated faults alone, judged.
func (h *hunt) laggingRestarts(at time.Duration) ([]Step, []Window, time.Duration) {
	q := h.nodes/2 + 1
	order := h.perm()
	lagging, s := order[:h.nodes-q], order[h.nodes-q]
	down := h.between(h.ttl, 3*h.ttl/2)
	var steps []Step
	for _, n := range lagging {
		steps = append(steps, Step{At: at, For: down, Kind: fault.Kill, Node: n, Fault: backend.Kill{Node: n}})
	}
	at += down
	cut := h.between(3*h.ttl/2, 2*h.ttl)
	steps = append(steps, Step{At: at, For: cut, Kind: fault.Partition, Node: s, Fault: backend.Partition{Node: s}})
	return steps, nil, at + cut
}
