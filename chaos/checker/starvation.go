package checker

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/history"
)

// Starvation is how long one client waited for a key while other clients
// kept getting it: the unfairness that Liveness, which looks at a key as a
// whole, cannot see.
//
// A client waits for a key while one of its acquires of the key is in flight
// and a quorum of nodes is up (see Liveness). One wait runs from the client's
// first acquire of the key, or its previous successful one, to its next
// successful one, or the end of its last attempt; it sums the time waiting
// over as many failed attempts as the client made meanwhile, and leaves out
// the time it spent on other keys or on nothing. A wait is starvation when it
// is longer than its key's threshold while the key was granted to other
// clients at least twice during it.
//
// The default threshold of a key is derived from the history itself: the
// key's liveness stall threshold (about two of its TTLs and how slow the machine was: what
// a free key may take to be handed on) plus the longest hold of the key (what
// a waiter may have to sit out, however fair the lock), or ten times the
// key's mean wait per grant (the time clients spent acquiring it, summed,
// over its successful acquires) if that is longer. Redlock promises no order
// among waiters, so a client can lose several hand-overs in a row by chance:
// waits that are about exponentially spread pass ten times their mean about
// once in twenty thousand, and a run whose every grant is slow, because of
// its faults or its load, does not make its clients look starved. With no
// stall threshold (no validity ends in the history) there is nothing to
// derive it from: waits are measured, not judged, unless CheckOptions gives
// a threshold.
type Starvation struct {
	Checked bool // false when the history has no node count or no acquires
	Judged  bool // a threshold applied: waits over it are violations
	// Wait is the worst wait of any client for any key while others got it:
	// the one longest for its key's threshold (the longest, when not
	// judged); zero when there was none.
	Wait       time.Duration
	Client     int           // the client of that wait
	Key        string        // the key of that wait
	Others     int           // grants of the key to other clients during that wait
	Start, End time.Duration // that wait's first moment, and the grant that ended it or its last moment
	Threshold  time.Duration // the threshold of that wait's key
	OK         bool          // no starvation (true when not checked or not judged)
	Faults     []fault.Kind  // fault kinds active around that wait that hit a node or that client
}

// Starvation's defaults: a wait is starvation past starvationFactor times its
// key's mean wait per grant, and only when at least starvedAfter grants went
// to others meanwhile.
const (
	starvationFactor = 10
	starvedAfter     = 2
)

// wait is the time client spent acquiring key between two of its grants.
type wait struct {
	client     int
	key        string
	start, end time.Duration // first moment waiting, and the grant (or the last moment waiting)
	length     time.Duration // time waiting with a quorum up
	others     int           // grants of key to other clients while client waited
}

// waitFor is what starvation knows of one key.
type waitFor struct {
	acquiring map[int][]interval      // per client, its acquires in flight
	granted   map[int][]time.Duration // per client, when its acquires succeeded
	grants    int
	longest   time.Duration // the longest hold
}

// starvation measures the waits of h and returns the summary and a violation
// for each wait over its key's threshold.
func starvation(h history.History, spans []Span, faults []FaultSpan, o CheckOptions, th stallThresholds) (Starvation, []Violation) {
	s := Starvation{OK: true, Judged: o.StarvationThreshold > 0 || th.judged()}
	span, ok := acquiring(h)
	if h.Nodes <= 0 || !ok {
		return s, nil
	}
	s.Checked = true
	ups := quorumUp(h.Nodes, faults, span)
	keys := waitsFor(h, spans)
	var vs []Violation
	worst := -1.0
	for _, key := range slices.Sorted(maps.Keys(keys)) {
		k := keys[key]
		ws := k.waits(key, ups)
		threshold := o.StarvationThreshold
		if stall := th.of(key); threshold == 0 && stall > 0 {
			threshold = max(stall+k.longest, starvationFactor*k.meanWait(ups))
		}
		for _, w := range ws {
			if w.others == 0 {
				continue // nobody got the key meanwhile: a stall, if anything (see Liveness)
			}
			score := float64(w.length)
			if s.Judged {
				score /= float64(threshold)
			}
			if score > worst {
				worst = score
				s.Wait, s.Client, s.Key, s.Others, s.Start, s.End, s.Threshold =
					w.length, w.client, w.key, w.others, w.start, w.end, threshold
			}
			if s.Judged && w.length > threshold && w.others >= starvedAfter {
				vs = append(vs, Violation{
					Property: LivenessStarvation, Key: key, Clients: []int{w.client},
					Start: w.start, End: w.end, Since: w.start,
					Detail: fmt.Sprintf("%s waited %v for %q between %v and %v with a quorum up while others got it %d times (threshold %v)",
						h.ClientName(w.client), w.length.Round(time.Millisecond), key, w.start.Round(time.Millisecond),
						w.end.Round(time.Millisecond), w.others, threshold.Round(time.Millisecond)),
				})
			}
		}
	}
	s.OK = len(vs) == 0
	return s, sortViolations(vs)
}

// waitsFor gathers, per key, the acquires, grants and longest hold of h.
func waitsFor(h history.History, spans []Span) map[string]*waitFor {
	keys := map[string]*waitFor{}
	for _, op := range h.Ops {
		if op.Kind != history.KindAcquire {
			continue
		}
		k := keys[op.Key]
		if k == nil {
			k = &waitFor{acquiring: map[int][]interval{}, granted: map[int][]time.Duration{}}
			keys[op.Key] = k
		}
		end := op.Complete
		if op.Outcome == history.Pending {
			end = h.End
		}
		k.acquiring[op.Client] = append(k.acquiring[op.Client], interval{op.Invoke, end})
		if op.Outcome == history.OK {
			k.granted[op.Client] = append(k.granted[op.Client], op.Complete)
			k.grants++
		}
	}
	for _, sp := range spans {
		if k := keys[sp.Key]; k != nil {
			k.longest = max(k.longest, sp.End-sp.Start)
		}
	}
	return keys
}

// waits returns every client's waits for key within the quorum-up intervals
// ups, by client then time.
func (k *waitFor) waits(key string, ups []interval) []wait {
	var all []time.Duration // every grant of the key
	for _, at := range k.granted {
		all = append(all, at...)
	}
	slices.Sort(all)
	var out []wait
	for _, c := range slices.Sorted(maps.Keys(k.acquiring)) {
		waiting := intersect(union(k.acquiring[c]), ups)
		if len(waiting) == 0 {
			continue
		}
		closed := joined(waiting)
		succ := slices.Sorted(slices.Values(k.granted[c]))
		prev := waiting[0].start
		for i := 0; i <= len(succ); i++ {
			next := waiting[len(waiting)-1].end
			if i < len(succ) {
				next = min(succ[i], next)
			}
			if n := overlap(waiting, prev, next); n > 0 {
				// The grants to others: all of them, less the client's own.
				others := coveredWithin(closed, all, prev, next) - coveredWithin(closed, succ, prev, next)
				out = append(out, wait{client: c, key: key, start: firstIn(waiting, prev), end: next, length: n, others: others})
			}
			if i < len(succ) {
				prev = max(prev, succ[i])
			}
		}
	}
	return out
}

// meanWait returns the time clients spent acquiring the key with a quorum
// up, summed over clients, per grant; 0 when it was never granted.
func (k *waitFor) meanWait(ups []interval) time.Duration {
	if k.grants == 0 {
		return 0
	}
	var total time.Duration
	for _, ivs := range k.acquiring {
		for _, iv := range intersect(union(ivs), ups) {
			total += iv.end - iv.start
		}
	}
	return total / time.Duration(k.grants)
}

// intersect returns a ∩ b, both sorted and disjoint, in
// O(len(a) log len(b)) and the size of the result.
func intersect(a, b []interval) []interval {
	var out []interval
	from := 0 // the intervals of b before from end before the rest of a
	for _, x := range a {
		j, _ := slices.BinarySearchFunc(b[from:], x.start, func(iv interval, t time.Duration) int {
			return cmp.Compare(iv.end, t+1) // the first that ends after x starts
		})
		for j += from; j < len(b) && b[j].start < x.end; j++ {
			if s, e := max(x.start, b[j].start), min(x.end, b[j].end); e > s {
				out = append(out, interval{s, e})
			}
		}
		from = max(from, j-1) // b[j-1] may reach into the next of a
	}
	return out
}

// firstIn returns the first moment at or after t that the sorted, disjoint
// ivs cover.
func firstIn(ivs []interval, t time.Duration) time.Duration {
	i, _ := slices.BinarySearchFunc(ivs, t, func(iv interval, t time.Duration) int { return cmp.Compare(iv.end, t+1) })
	if i < len(ivs) {
		return max(ivs[i].start, t)
	}
	return t
}

// joined returns the sorted, disjoint ivs with those that touch made one:
// the same set of moments, closed intervals each, none sharing an end.
func joined(ivs []interval) []interval {
	var out []interval
	for _, iv := range ivs {
		if n := len(out); n > 0 && iv.start <= out[n-1].end {
			out[n-1].end = max(out[n-1].end, iv.end)
			continue
		}
		out = append(out, iv)
	}
	return out
}

// coveredWithin counts the times ts (sorted) strictly between from and to
// that the closed intervals ivs (sorted, disjoint, none touching) cover.
func coveredWithin(ivs []interval, ts []time.Duration, from, to time.Duration) int {
	i, _ := slices.BinarySearchFunc(ivs, from, func(iv interval, t time.Duration) int { return cmp.Compare(iv.end, t+1) })
	n := 0
	for ; i < len(ivs) && ivs[i].start < to; i++ {
		// ts in [start, end] and in (from, to).
		lo, _ := slices.BinarySearch(ts, max(ivs[i].start, from+1))
		hi, _ := slices.BinarySearch(ts, min(ivs[i].end+1, to))
		n += max(hi-lo, 0)
	}
	return n
}
