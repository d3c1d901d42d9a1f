package checker

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/history"
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
// A stall longer than its key's threshold is a liveness violation, in the
// verdict like any other. The default threshold of a key is derived from the
// history itself: twice the longest lease an acquire of that key was given
// (from the acquire's invocation to its validity end: about the key's TTL;
// the longest of any key for a key never granted with one), plus four times
// the p99 latency of releases (one round trip to the nodes with no holder to
// wait for: how slow the machine was, whatever the key; the acquires'
// latency when there are no releases). A waiter may have to wait out the
// key's TTL (a key left on a node its release did not reach; a holder's TTL
// it sleeps on) and back off about as long again after attempts that
// failed, each attempt as slow as the machine; a key free and wanted with a
// quorum up for longer than that is a lock that does not hand itself on.
// Another key's longer TTL does not excuse it. With no validity ends in the
// history there is nothing to derive it from: stalls are measured, not
// judged, unless CheckOptions gives a threshold (for every key).
type Liveness struct {
	Checked bool // false when the history has no node count or no acquires
	Judged  bool // a threshold applied: stalls over it are violations
	// LongestStall is the worst stall: the one longest for its key's
	// threshold (the longest, when not judged); zero when there was none.
	LongestStall time.Duration
	Key          string        // the key of that stall
	Start, End   time.Duration // the gap between successes it was measured in
	// Threshold is the threshold of that stall's key; with no stall, the
	// least threshold of any key.
	Threshold  time.Duration
	OK         bool          // no stall over its key's threshold (true when not checked or not judged)
	Faults     []fault.Kind  // fault kinds active around the worst stall
	QuorumLost time.Duration // total time without a quorum while clients were acquiring
}

type interval struct{ start, end time.Duration }

// stall is one gap between successes of key, and the free, wanted time in it.
type stall struct {
	key        string
	start, end time.Duration
	length     time.Duration
}

// liveness measures the stalls of h and returns the summary and a violation
// for each stall over its key's threshold.
func liveness(h history.History, spans []Span, faults []FaultSpan, o CheckOptions, th stallThresholds) (Liveness, []Violation) {
	l := Liveness{Threshold: th.least(), Judged: th.judged(), OK: true}
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
	keys := demandsOf(h, spans)
	var vs []Violation
	worst := -1.0
	for _, key := range slices.Sorted(maps.Keys(keys)) {
		threshold := th.of(key)
		for _, s := range keys[key].stalls(key, ups) {
			score := float64(s.length)
			if l.Judged {
				score /= float64(threshold)
			}
			if score > worst {
				worst = score
				l.LongestStall, l.Key, l.Start, l.End, l.Threshold = s.length, s.key, s.start, s.end, threshold
			}
			if l.Judged && s.length > threshold {
				vs = append(vs, Violation{
					Property: LivenessStall, Key: key, Start: s.start, End: s.end, Since: s.start,
					Detail: fmt.Sprintf("%q was free and wanted for %v between %v and %v with a quorum up, yet nobody got it (threshold %v)",
						key, s.length.Round(time.Millisecond), s.start.Round(time.Millisecond),
						s.end.Round(time.Millisecond), threshold.Round(time.Millisecond)),
				})
			}
		}
	}
	l.OK = len(vs) == 0
	return l, sortViolations(vs)
}

// acquiring returns the span of time during which clients were acquiring:
// from the first acquire's invocation to the last one's completion (the end
// of the history for one that never completed).
func acquiring(h history.History) (interval, bool) {
	var iv interval
	found := false
	for _, op := range h.Ops {
		if op.Kind != history.KindAcquire {
			continue
		}
		end := op.Complete
		if op.Outcome == history.Pending {
			end = h.End
		}
		if !found {
			iv, found = interval{op.Invoke, end}, true
		}
		iv.start, iv.end = min(iv.start, op.Invoke), max(iv.end, end)
	}
	return iv, found
}

// demand is what liveness knows of one key: when it was wanted, held and
// granted.
type demand struct {
	wanted, held []interval      // acquires in flight; holds
	granted      []time.Duration // successful acquires' returns
}

// demandsOf gathers, per key, the acquires and holds of h.
func demandsOf(h history.History, spans []Span) map[string]*demand {
	keys := map[string]*demand{}
	for _, op := range h.Ops {
		if op.Kind != history.KindAcquire {
			continue
		}
		d := keys[op.Key]
		if d == nil {
			d = &demand{}
			keys[op.Key] = d
		}
		end := op.Complete
		if op.Outcome == history.Pending {
			end = h.End
		}
		d.wanted = append(d.wanted, interval{op.Invoke, end})
		if op.Outcome == history.OK {
			d.granted = append(d.granted, op.Complete)
		}
	}
	for _, s := range spans {
		if d := keys[s.Key]; d != nil {
			d.held = append(d.held, interval{s.Start, s.End})
		}
	}
	return keys
}

// stalls returns, for each gap between successive successes of key within
// the quorum-up intervals ups, the time in it that key was wanted and free.
// Only the intervals of ups the key was free in are looked at, so that each
// key costs its own ops, not the whole run's faults.
func (d *demand) stalls(key string, ups []interval) []stall {
	free := subtract(union(d.wanted), union(d.held))
	succ := slices.Sorted(slices.Values(d.granted))
	var out []stall
	last := -1 // the last of ups looked at
	for _, f := range free {
		// The first of ups that ends after f starts, past those looked at.
		u, _ := slices.BinarySearchFunc(ups[last+1:], f.start, func(iv interval, t time.Duration) int {
			return cmp.Compare(iv.end, t+1)
		})
		for u += last + 1; u < len(ups) && ups[u].start < f.end; u++ {
			out = append(out, gaps(key, ups[u], free, succ)...)
			last = u
		}
	}
	return out
}

// gaps returns the stalls of key within the quorum-up interval iv: for each
// gap between successive successes succ (sorted), the time in it that the
// key was free.
func gaps(key string, iv interval, free []interval, succ []time.Duration) []stall {
	var out []stall
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
