package history

import (
	"slices"
	"time"

	"github.com/fencedlock/fencedlock/chaos/fault"
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
// quorums share (see explains).
type blamer struct {
	h         History
	faults    []FaultSpan
	reach     []map[string]time.Duration // per fault: lock key -> end of its window on that key
	quorums   map[int][][]int            // acquire op ID -> the node sets that held it; absent: unknown
	tokenSets map[int][]int              // acquire op ID -> the nodes that made its token; absent: unknown
}

func newBlamer(h History, spans []Span, faults []FaultSpan, aftermath time.Duration) *blamer {
	b := &blamer{h: h, faults: faults, quorums: map[int][][]int{}, tokenSets: map[int][]int{}}
	lease := map[string]time.Duration{}
	for _, op := range h.Ops {
		if op.Kind == KindAcquire && op.Outcome == OK {
			if op.ValidUntil != 0 {
				lease[op.Key] = max(lease[op.Key], op.ValidUntil-op.Complete)
			}
			if op.Granted != nil {
				b.quorums[op.ID] = [][]int{op.Granted}
				b.tokenSets[op.ID] = op.Granted
			}
		}
	}
	// An extension moves the hold onto the nodes that extended it; one
	// whose nodes are not known makes the hold's nodes unknown.
	for _, op := range h.Ops {
		if op.Kind != KindExtend || op.Outcome != OK {
			continue
		}
		if qs, ok := b.quorums[op.Hold]; ok && op.Granted != nil {
			b.quorums[op.Hold] = append(qs, op.Granted)
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
		if slices.Contains(q, f.Node) {
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
		qa, qb, pair := b.pairQuorums(*v)
		if !pair {
			v.Faults = b.window(key, v.Since, v.End, v.Clients, v.Nodes, aftermath)
			for _, k := range v.Faults {
				if slices.Contains(expected[v.Property], k) {
					v.Expected = true
				}
			}
			continue
		}
		// Client faults as before; node faults only within the holds'
		// own time, on their nodes.
		var kinds []fault.Kind
		hit := map[int]bool{} // nodes where an expected node fault broke an assumption
		for j, f := range b.faults {
			if f.Kind.ClientSide() {
				if !slices.Contains(v.Clients, f.Client) || !b.inWindow(j, key, v.Since, v.End, true) {
					continue
				}
				if slices.Contains(expected[v.Property], f.Kind) {
					v.Expected = true
				}
			} else {
				if !b.inWindow(j, key, v.Since, v.End, false) || !onAny(f.Node, qa, qb) {
					continue
				}
				if slices.Contains(expected[v.Property], f.Kind) {
					hit[f.Node] = true
				}
			}
			if !slices.Contains(kinds, f.Kind) {
				kinds = append(kinds, f.Kind)
			}
		}
		slices.Sort(kinds)
		v.Faults = kinds
		if !v.Expected && len(hit) > 0 {
			v.Expected = explains(qa, qb, hit, b.h.Nodes)
		}
	}
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

// pairQuorums returns, for a violation judged on two holds, the node sets
// each hold rests on (nil: unknown): for mutual exclusion, the nodes that
// granted or extended it; for token order and uniqueness, the nodes that
// made its token. pair is false when the violation is not on two holds or
// neither hold's nodes are known: it is then blamed by its window alone.
func (b *blamer) pairQuorums(v Violation) (qa, qb [][]int, pair bool) {
	if len(v.Ops) != 2 {
		return nil, nil, false
	}
	switch v.Property {
	case MutualExclusion:
		qa, qb = b.quorums[v.Ops[0]], b.quorums[v.Ops[1]]
	case FencingOrder, DuplicateTokens:
		if q, ok := b.tokenSets[v.Ops[0]]; ok {
			qa = [][]int{q}
		}
		if q, ok := b.tokenSets[v.Ops[1]]; ok {
			qb = [][]int{q}
		}
	default:
		return nil, nil, false
	}
	return qa, qb, qa != nil || qb != nil
}

// onAny reports whether node is in one of the known node sets, or could be
// (a hold whose nodes are unknown).
func onAny(node int, qa, qb [][]int) bool {
	if qa == nil || qb == nil {
		return true
	}
	for _, q := range slices.Concat(qa, qb) {
		if slices.Contains(q, node) {
			return true
		}
	}
	return false
}

// explains reports whether the nodes hit can account for two holds on
// quorums qa and qb (nil: any set of a quorum of the n nodes). The property
// rests on a node the two share: it can fail only if some pair of their
// quorums shares nodes, and every one of those was hit (a node that was not
// kept its counter, or its key, and the proof goes through on it). With
// one side unknown, the other's quorum q meets every possible quorum only
// in hit nodes iff the nodes outside q and the hit ones of q can make a
// quorum, and one of q's was hit.
func explains(qa, qb [][]int, hit map[int]bool, n int) bool {
	if qa == nil {
		qa, qb = qb, qa
	}
	for _, a := range qa {
		hitA := 0
		for _, j := range a {
			if hit[j] {
				hitA++
			}
		}
		if qb == nil {
			if hitA > 0 && (n == 0 || n-len(a)+hitA >= n/2+1) {
				return true
			}
			continue
		}
		for _, bq := range qb {
			shared, all := 0, true
			for _, j := range a {
				if slices.Contains(bq, j) {
					shared++
					all = all && hit[j]
				}
			}
			if shared > 0 && all {
				return true
			}
		}
	}
	return false
}
