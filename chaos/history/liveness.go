package history

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/fencedlock/fencedlock/chaos/fault"
)

// Liveness is how long acquisitions stalled while a quorum of nodes was up.
// A node is down during a fault of a kind that TakesNodeDown; a quorum is up
// while at most Nodes-(Nodes/2+1) nodes are down. The stalls measured are the
// gaps between successful acquires (and between those and the edges of each
// quorum-up interval) within the span of time clients were acquiring. A long
// stall is a warning, not a safety violation: it does not change the verdict.
type Liveness struct {
	Checked      bool          // false when the history has no node count or no acquires
	LongestStall time.Duration // the longest gap with a quorum up and no acquire succeeding
	Start, End   time.Duration // where that gap was
	Threshold    time.Duration
	OK           bool          // LongestStall <= Threshold (true when not checked)
	Faults       []fault.Kind  // fault kinds active around the longest stall
	QuorumLost   time.Duration // total time without a quorum while clients were acquiring
}

type interval struct{ start, end time.Duration }

func liveness(h History, faults []FaultSpan, o CheckOptions) Liveness {
	l := Liveness{Threshold: o.StallThreshold, OK: true}
	var span *interval // when clients were acquiring
	var succ []time.Duration
	for _, op := range h.Ops {
		if op.Kind != KindAcquire {
			continue
		}
		end := op.Complete
		if op.Outcome == Pending {
			end = h.End
		}
		if span == nil {
			span = &interval{op.Invoke, end}
		}
		span.start, span.end = min(span.start, op.Invoke), max(span.end, end)
		if op.Outcome == OK {
			succ = append(succ, op.Complete)
		}
	}
	if h.Nodes <= 0 || span == nil {
		return l
	}
	l.Checked = true
	slices.Sort(succ)
	ups := quorumUp(h.Nodes, faults, *span)
	l.QuorumLost = span.end - span.start
	for _, iv := range ups {
		l.QuorumLost -= iv.end - iv.start
		prev := iv.start
		i, _ := slices.BinarySearch(succ, iv.start)
		for ; i < len(succ) && succ[i] <= iv.end; i++ {
			l.stall(prev, succ[i])
			prev = succ[i]
		}
		l.stall(prev, iv.end)
	}
	l.OK = l.LongestStall <= l.Threshold
	l.Faults = blamed(faults, l.Start, l.End, o.Aftermath, nil)
	return l
}

func (l *Liveness) stall(from, to time.Duration) {
	if to-from > l.LongestStall {
		l.LongestStall, l.Start, l.End = to-from, from, to
	}
}

// quorumUp returns the intervals within span during which a quorum of the
// nodes was up.
func quorumUp(nodes int, faults []FaultSpan, span interval) []interval {
	type event struct {
		t     time.Duration
		node  int
		delta int
	}
	var evs []event
	for _, f := range faults {
		if f.Kind.TakesNodeDown() && f.Node >= 0 && f.Node < nodes && f.End > f.Start {
			evs = append(evs, event{f.Start, f.Node, +1}, event{f.End, f.Node, -1})
		}
	}
	// At equal times ends come first: a node restarted at t and killed again
	// at t was never down twice.
	slices.SortFunc(evs, func(a, b event) int { return cmp.Or(cmp.Compare(a.t, b.t), cmp.Compare(a.delta, b.delta)) })
	maxDown := nodes - (nodes/2 + 1)
	depth := make([]int, nodes) // faults holding each node down
	down := 0
	var ups []interval
	upSince, up := time.Duration(math.MinInt64), true
	for _, e := range evs {
		before := depth[e.node] > 0
		depth[e.node] += e.delta
		if after := depth[e.node] > 0; after != before {
			down += e.delta
		}
		switch nowUp := down <= maxDown; {
		case up && !nowUp:
			ups = append(ups, interval{upSince, e.t})
		case !up && nowUp:
			upSince = e.t
		}
		up = down <= maxDown
	}
	if up {
		ups = append(ups, interval{upSince, math.MaxInt64})
	}
	var clipped []interval
	for _, iv := range ups {
		iv.start, iv.end = max(iv.start, span.start), min(iv.end, span.end)
		if iv.end > iv.start {
			clipped = append(clipped, iv)
		}
	}
	return clipped
}
