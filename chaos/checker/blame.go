package checker

import (
	"slices"
	"time"

	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/history"
)

// blamer attributes violations to faults by what each fault could reach.
//
// A fault's window runs from its start to its end and then on, for each
// lock key that was held or being acquired while it was active (by the
// client it hit; on the node it hit, where the history says which nodes
// granted a hold), for that key's lease: the longest validity of the key's
// acquires (or CheckOptions.Aftermath when set). A key the fault could not
// reach gets no aftermath: a fault over before a hold of it began cannot
// have touched the hold.
//
// Mutual exclusion, fencing order and duplicate tokens are judged on two
// holds, and each rests on a node that both holds' quorums share
// (docs/protocol.md, Claims 1–3): with the quorums known, a node fault
// explains the violation only if it broke the assumption on every node the
// quorums share (see explains), for every pair of holds the violation
// rests on (see pairs).
type blamer struct {
	h         history.History
	spans     []Span // by acquire op ID
	eps       time.Duration
	faults    []FaultSpan
	reach     []map[string]time.Duration // per fault: lock key -> end of its window on that key
	quorums   map[int][]quorumStep       // acquire op ID -> the node sets that held it; absent: unknown
	tokenSets map[int][]int              // acquire op ID -> the nodes that made its token; absent: unknown
	longest   time.Duration              // the longest lease of any key
}

// quorumStep is a node set a hold rests on: the nodes that granted it (or
// extended it), from that call's return to the validity end it gave.
type quorumStep struct {
	nodes       []int
	from, until time.Duration
}

// stepOf returns op's node set and when it is in force.
func stepOf(op history.Op) quorumStep {
	until := op.ValidUntil
	if until == 0 {
		until = forever
	}
	return quorumStep{nodes: op.Granted, from: op.Complete, until: until}
}

func newBlamer(h history.History, spans []Span, faults []FaultSpan, aftermath, eps time.Duration) *blamer {
	b := &blamer{h: h, spans: spans, eps: eps, faults: faults, quorums: map[int][]quorumStep{}, tokenSets: map[int][]int{}}
	lease := map[string]time.Duration{}
	for _, op := range h.Ops {
		if op.Kind == history.KindAcquire && op.Outcome == history.OK {
			if op.ValidUntil != 0 {
				lease[op.Key] = max(lease[op.Key], op.ValidUntil-op.Complete)
				b.longest = max(b.longest, lease[op.Key])
			}
			if op.Granted != nil {
				b.quorums[op.ID] = []quorumStep{stepOf(op)}
				b.tokenSets[op.ID] = op.Granted
			}
		}
	}
	// An extension moves the hold onto the nodes that extended it; one
	// whose nodes are not known makes the hold's nodes unknown.
	for _, op := range h.Ops {
		if op.Kind != history.KindExtend || op.Outcome != history.OK {
			continue
		}
		if qs, ok := b.quorums[op.Hold]; ok && op.Granted != nil {
			b.quorums[op.Hold] = append(qs, stepOf(op))
		} else {
			delete(b.quorums, op.Hold)
		}
	}
	b.reach = make([]map[string]time.Duration, len(faults))
	for i, f := range faults {
		b.reach[i] = map[string]time.Duration{}
		for _, s := range spans {
			if s.Invoke > f.End || s.End < f.Start || !b.touches(f, s) {
				continue
			}
			after := aftermath
			if after == 0 {
				after = lease[s.Key]
			}
			b.reach[i][s.Key] = max(b.reach[i][s.Key], f.End+after)
		}
	}
	return b
}

// touches reports whether fault f could act on hold s: a client fault on
// its client; a node fault on one of its nodes, when they are known.
func (b *blamer) touches(f FaultSpan, s Span) bool {
	if f.Kind.ClientSide() {
		return f.Client == s.Client
	}
	qs, known := b.quorums[s.Acquire]
	if !known {
		return true
	}
	for _, q := range qs {
		if slices.Contains(q.nodes, f.Node) {
			return true
		}
	}
	return false
}

// inWindow reports whether fault i's window on key reaches [from, to];
// with aftermath false, only the fault itself counts.
func (b *blamer) inWindow(i int, key string, from, to time.Duration, aftermath bool) bool {
	f := b.faults[i]
	end := f.End
	if aftermath {
		end = max(end, b.reach[i][key])
	}
	return f.Start <= to && end >= from
}

// window returns the sorted kinds of the faults whose window on key
// reaches [from, to]; client faults count only for clients, node faults
// only on nodes (nil: any).
func (b *blamer) window(key string, from, to time.Duration, clients, nodes []int, aftermath bool) []fault.Kind {
	var kinds []fault.Kind
	for i, f := range b.faults {
		if f.Kind.ClientSide() && clients != nil && !slices.Contains(clients, f.Client) {
			continue
		}
		if !f.Kind.ClientSide() && nodes != nil && !slices.Contains(nodes, f.Node) {
			continue
		}
		if b.inWindow(i, key, from, to, aftermath) && !slices.Contains(kinds, f.Kind) {
			kinds = append(kinds, f.Kind)
		}
	}
	slices.Sort(kinds)
	return kinds
}

// blame fills in Faults and Expected of each violation.
func (b *blamer) blame(vs []Violation, expected map[Property][]fault.Kind) {
	for i := range vs {
		v := &vs[i]
		key := b.lockKey(*v)
		// A fault over before a handover does not slow it (see Handover).
		aftermath := v.Property != SlowHandover
		pairs := b.pairs(*v)
		if pairs == nil {
			v.Faults = b.window(key, v.Since, v.End, v.Clients, v.Nodes, aftermath)
			v.Expected = anyExpected(v.Faults, expected[v.Property])
			continue
		}
		// Expected only when every pair of holds it rests on is.
		var kinds []fault.Kind
		v.Expected = true
		for _, p := range pairs {
			pk, ok := b.blamePair(v.Property, key, p, expected[v.Property])
			v.Expected = v.Expected && ok
			for _, k := range pk {
				if !slices.Contains(kinds, k) {
					kinds = append(kinds, k)
				}
			}
		}
		slices.Sort(kinds)
		v.Faults = kinds
	}
}

// anyExpected reports whether one of kinds is among expected.
func anyExpected(kinds, expected []fault.Kind) bool {
	for _, k := range kinds {
		if slices.Contains(expected, k) {
			return true
		}
	}
	return false
}

// blamePair returns the kinds blamed for the violation of property by the
// pair p of holds, and whether one that breaks its assumptions explains
// it: with neither hold's nodes known, any in its window; else client
// faults of its clients as before, and node faults only within the holds'
// own time, on their nodes, as explains says.
func (b *blamer) blamePair(property Property, key string, p holdPair, expected []fault.Kind) ([]fault.Kind, bool) {
	clients := []int{b.h.Ops[p.a-1].Client, b.h.Ops[p.b-1].Client}
	sets, known := b.quorumPairs(property, p)
	if !known {
		kinds := b.window(key, p.since, p.end, clients, nil, true)
		return kinds, anyExpected(kinds, expected)
	}
	var kinds []fault.Kind
	explained := false
	hit := map[int]bool{} // nodes where an expected node fault broke an assumption
	for j, f := range b.faults {
		if f.Kind.ClientSide() {
			if !slices.Contains(clients, f.Client) || !b.inWindow(j, key, p.since, p.end, true) {
				continue
			}
			if slices.Contains(expected, f.Kind) {
				explained = true
			}
		} else {
			if !b.inWindow(j, key, p.since, p.end, false) || !onAny(f.Node, sets) {
				continue
			}
			if slices.Contains(expected, f.Kind) {
				hit[f.Node] = true
			}
		}
		if !slices.Contains(kinds, f.Kind) {
			kinds = append(kinds, f.Kind)
		}
	}
	slices.Sort(kinds)
	return kinds, explained || (len(hit) > 0 && explains(sets, hit, b.h.Nodes))
}

// lockKey is the lock key a violation is about: its own key, or, for the
// store properties (keyed by resource), the key of its first op.
func (b *blamer) lockKey(v Violation) string {
	if len(v.Ops) > 0 && v.Ops[0] >= 1 && v.Ops[0] <= len(b.h.Ops) {
		if k := b.h.Ops[v.Ops[0]-1].Key; k != "" {
			return k
		}
	}
	return v.Key
}

// onAny reports whether node is in one of the node sets, or could be (a
// hold whose nodes are unknown).
func onAny(node int, sets []setPair) bool {
	for _, sp := range sets {
		if sp.a == nil || sp.b == nil || slices.Contains(sp.a, node) || slices.Contains(sp.b, node) {
			return true
		}
	}
	return false
}

// explains reports whether the nodes hit can account for two holds on
// every pair of node sets given (nil: any set of a quorum of the n nodes).
// The property rests on a node the two sets share: it can fail only if
// they share nodes and every one of those was hit (a node that was not
// kept its counter, or its key, and the proof goes through on it). With
// one side unknown, the other's set q meets every possible quorum only in
// hit nodes iff the nodes outside q and the hit ones of q can make a
// quorum, and one of q's was hit.
func explains(sets []setPair, hit map[int]bool, n int) bool {
	for _, sp := range sets {
		if !explainsPair(sp, hit, n) {
			return false
		}
	}
	return len(sets) > 0
}

func explainsPair(sp setPair, hit map[int]bool, n int) bool {
	a, bq := sp.a, sp.b
	if a == nil {
		a, bq = bq, a
	}
	if bq == nil {
		hitA := 0
		for _, j := range a {
			if hit[j] {
				hitA++
			}
		}
		return hitA > 0 && (n == 0 || n-len(a)+hitA >= n/2+1)
	}
	shared, all := 0, true
	for _, j := range a {
		if slices.Contains(bq, j) {
			shared++
			all = all && hit[j]
		}
	}
	return shared > 0 && all
}
