package history

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/fencedlock/fencedlock/chaos/fault"
)

// Liveness is how long a key went without being acquired while it was free,
// wanted and able to be had.
//
// A stall is measured between two successive successful acquires of a key
// (and between those and the edges of each interval during which a quorum of
// nodes was up): it is the time in that gap during which some client was
// acquiring the key (an acquire was in flight) and no client held it (no
// Span). Time a holder keeps the key, and time nobody wants it, are not
// stalls; a gap in which clients kept failing to acquire a free key is. A
// node is down during a fault of a kind that TakesNodeDown (failed faults
// included, since they may have half happened); a quorum is up while at most
// Nodes-(Nodes/2+1) nodes are down.
//
// A stall longer than Threshold is a liveness violation, in the verdict like
// any other. The default threshold is derived from the history itself:
// twice the longest lease any acquire was given (from the acquire's
// invocation to its validity end: about the TTL), plus four times the p99
// latency of releases (one round trip to the nodes with no holder to wait
// for: how slow the machine was; the acquires' latency when there are no
// releases). A waiter may have to wait out a TTL (a key left on a node its
// release did not reach; a holder's TTL it sleeps on) and back off about as
// long again after attempts that failed, each attempt as slow as the
// machine; a key free and wanted with a quorum up for longer than that is a
// lock that does not hand itself on. With no validity ends in the history
// there is nothing to derive it from: stalls are measured, not judged,
// unless CheckOptions gives a threshold.
type Liveness struct {
	Checked      bool          // false when the history has no node count or no acquires
	Judged       bool          // a threshold applied: stalls over it are violations
	LongestStall time.Duration // the longest stall of any key
	Key          string        // the key of that stall
	Start, End   time.Duration // the gap between successes it was measured in
	Threshold    time.Duration
	OK           bool          // no stall over Threshold (true when not checked or not judged)
	Faults       []fault.Kind  // fault kinds active around the longest stall
	QuorumLost   time.Duration // total time without a quorum while clients were acquiring
}

type interval struct{ start, end time.Duration }

// stall is one gap between successes of key, and the free, wanted time in it.
type stall struct {
	key        string
	start, end time.Duration
	length     time.Duration
}

// liveness measures the stalls of h and returns the summary and a violation
// for each stall over the threshold.
func liveness(h History, faults []FaultSpan, o CheckOptions) (Liveness, []Violation) {
	l := Liveness{Threshold: o.StallThreshold, Judged: o.StallThreshold > 0, OK: true}
	span, ok := acquiring(h)
	if h.Nodes <= 0 || !ok {
		return l, nil
	}
	l.Checked = true
	ups := quorumUp(h.Nodes, faults, span)
	l.QuorumLost = span.end - span.start
	for _, iv := range ups {
		l.QuorumLost -= iv.end - iv.start
	}
	spans, _ := Spans(h) // Check has validated h
	var vs []Violation
	for _, key := range keysOf(h) {
		for _, s := range stalls(h, spans, key, ups) {
			if s.length > l.LongestStall {
				l.LongestStall, l.Key, l.Start, l.End = s.length, s.key, s.start, s.end
			}
			if l.Judged && s.length > l.Threshold {
				vs = append(vs, Violation{
					Property: LivenessStall, Key: key, Start: s.start, End: s.end, Since: s.start,
					Detail: fmt.Sprintf("%q was free and wanted for %v between %v and %v with a quorum up, yet nobody got it (threshold %v)",
						key, s.length.Round(time.Millisecond), s.start.Round(time.Millisecond),
						s.end.Round(time.Millisecond), l.Threshold.Round(time.Millisecond)),
				})
			}
		}
	}
	l.OK = len(vs) == 0
	if l.LongestStall > 0 {
		l.Faults = blamed(faults, l.Start, l.End, o.Aftermath, nil)
	}
	return l, sortViolations(vs)
}

// acquiring returns the span of time during which clients were acquiring:
// from the first acquire's invocation to the last one's completion (the end
// of the history for one that never completed).
func acquiring(h History) (interval, bool) {
	var iv interval
	found := false
	for _, op := range h.Ops {
		if op.Kind != KindAcquire {
			continue
		}
		end := op.Complete
		if op.Outcome == Pending {
			end = h.End
		}
		if !found {
			iv, found = interval{op.Invoke, end}, true
		}
		iv.start, iv.end = min(iv.start, op.Invoke), max(iv.end, end)
	}
	return iv, found
}

// stalls returns, for each gap between successive successes of key within
// the quorum-up intervals ups, the time in it that key was wanted and free.
func stalls(h History, spans []Span, key string, ups []interval) []stall {
	var wanted, held []interval
	var succ []time.Duration
	for _, op := range h.Ops {
		if op.Kind != KindAcquire || op.Key != key {
			continue
		}
		end := op.Complete
		if op.Outcome == Pending {
			end = h.End
		}
		wanted = append(wanted, interval{op.Invoke, end})
		if op.Outcome == OK {
			succ = append(succ, op.Complete)
		}
	}
	for _, s := range spans {
		if s.Key == key {
			held = append(held, interval{s.Start, s.End})
		}
	}
	free := subtract(union(wanted), union(held))
	slices.Sort(succ)
	var out []stall
	for _, iv := range ups {
		prev := iv.start
		i, _ := slices.BinarySearch(succ, iv.start)
		for ; i <= len(succ); i++ {
			next := iv.end
			if i < len(succ) && succ[i] <= iv.end {
				next = succ[i]
			}
			if n := overlap(free, prev, next); n > 0 {
				out = append(out, stall{key: key, start: prev, end: next, length: n})
			}
			if next == iv.end {
				break
			}
			prev = next
		}
	}
	return out
}

// union returns the union of ivs as sorted, disjoint intervals.
func union(ivs []interval) []interval {
	ivs = slices.Clone(ivs)
	slices.SortFunc(ivs, func(a, b interval) int { return cmp.Compare(a.start, b.start) })
	var out []interval
	for _, iv := range ivs {
		if iv.end <= iv.start {
			continue
		}
		if n := len(out); n > 0 && iv.start <= out[n-1].end {
			out[n-1].end = max(out[n-1].end, iv.end)
			continue
		}
		out = append(out, iv)
	}
	return out
}

// subtract returns a minus b, both sorted and disjoint.
func subtract(a, b []interval) []interval {
	var out []interval
	j := 0
	for _, iv := range a {
		start := iv.start
		for ; j < len(b) && b[j].end <= start; j++ {
		}
		for k := j; k < len(b) && b[k].start < iv.end; k++ {
			if b[k].start > start {
				out = append(out, interval{start, b[k].start})
			}
			start = max(start, b[k].end)
		}
		if start < iv.end {
			out = append(out, interval{start, iv.end})
		}
	}
	return out
}

// overlap returns how much of [from, to] the sorted, disjoint ivs cover.
func overlap(ivs []interval, from, to time.Duration) time.Duration {
	i, _ := slices.BinarySearchFunc(ivs, from, func(iv interval, t time.Duration) int { return cmp.Compare(iv.end, t) })
	var n time.Duration
	for ; i < len(ivs) && ivs[i].start < to; i++ {
		n += min(ivs[i].end, to) - max(ivs[i].start, from)
	}
	return max(n, 0)
}

// keysOf returns the lock keys acquired in h, sorted.
func keysOf(h History) []string {
	var keys []string
	for _, op := range h.Ops {
		if op.Kind == KindAcquire && !slices.Contains(keys, op.Key) {
			keys = append(keys, op.Key)
		}
	}
	slices.Sort(keys)
	return keys
}

// stallThreshold is the default threshold (see Liveness), 0 when the
// history has no validity end to derive it from.
func stallThreshold(h History) time.Duration {
	var lease time.Duration
	var rel, acq []time.Duration
	for _, op := range h.Ops {
		switch {
		case op.Kind == KindAcquire && op.Outcome == OK:
			acq = append(acq, op.Complete-op.Invoke)
			if op.ValidUntil != 0 {
				lease = max(lease, op.ValidUntil-op.Invoke)
			}
		case op.Kind == KindRelease && (op.Outcome == OK || op.Outcome == LockLost):
			rel = append(rel, op.Complete-op.Invoke)
		}
	}
	if lease <= 0 {
		return 0
	}
	// A release is one round trip to the nodes, with nobody to wait for:
	// how slow the machine and the network were. Without releases, the
	// acquires' latency, waits behind holders included, is a looser stand-in.
	trip := rel
	if len(trip) == 0 {
		trip = acq
	}
	slices.Sort(trip)
	return 2*lease + 4*trip[max((len(trip)*99+99)/100, 1)-1]
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
