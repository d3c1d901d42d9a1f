package checker

import (
	"slices"
	"time"
)

// A violation of mutual exclusion, token order or token uniqueness counts
// once, named by two holds (Violation.Ops), but the later hold may break
// the property against several earlier ones at once: an acquire whose
// token is no greater than two tokens returned before it, a token drawn a
// third time, a hold that begins inside two others. Each such pair rests
// on the nodes its own two quorums share, so a fault that explains one
// pair need not explain another: the violation is expected only when
// every pair is.

// holdPair is one pair of holds a violation rests on: a, the earlier, and
// b; the faults' window [since, end]; and, for mutual exclusion, when the
// two overlap ([from, end]).
type holdPair struct {
	a, b       int // acquire op IDs
	since, end time.Duration
	from       time.Duration
}

// pairs returns every pair of holds violation v rests on, v's own pair
// first; nil when v is not judged on two holds.
func (b *blamer) pairs(v Violation) []holdPair {
	if len(v.Ops) != 2 {
		return nil
	}
	own := holdPair{a: v.Ops[0], b: v.Ops[1], since: v.Since, end: v.End, from: v.Start}
	later := b.h.Ops[v.Ops[1]-1]
	ps := []holdPair{own}
	add := func(p holdPair) {
		if p.a != own.a {
			ps = append(ps, p)
		}
	}
	switch v.Property {
	case MutualExclusion:
		s, ok := b.span(later.ID)
		if !ok {
			return ps
		}
		for _, r := range b.spans {
			before := r.Start < s.Start || (r.Start == s.Start && r.Acquire < s.Acquire)
			if r.Key != s.Key || r.Acquire == s.Acquire || !before || r.End <= r.Start || s.Start >= r.End-b.eps {
				continue
			}
			add(holdPair{a: r.Acquire, b: s.Acquire, since: min(r.Invoke, s.Invoke), end: min(r.End, s.End), from: s.Start})
		}
	case FencingOrder:
		for _, a := range acquired(b.h) {
			if a.Key == later.Key && a.Complete < later.Invoke && a.Token >= later.Token {
				add(holdPair{a: a.ID, b: later.ID, since: a.Invoke, end: later.Complete, from: a.Complete})
			}
		}
	case DuplicateTokens:
		for _, a := range acquired(b.h) {
			if a.Key == later.Key && a.Token == later.Token && a.ID < later.ID {
				add(holdPair{a: a.ID, b: later.ID, since: min(a.Invoke, later.Invoke), end: max(a.Complete, later.Complete),
					from: min(a.Complete, later.Complete)})
			}
		}
	default:
		return nil
	}
	return ps
}

// span returns the hold of acquire id.
func (b *blamer) span(id int) (Span, bool) {
	i, ok := slices.BinarySearchFunc(b.spans, id, func(s Span, id int) int { return s.Acquire - id })
	if !ok {
		return Span{}, false
	}
	return b.spans[i], true
}

// setPair is a node set of each of two holds that must meet in nodes that
// were hit for a fault to explain their violation (nil: not known).
type setPair struct{ a, b []int }

// quorumPairs returns the pairs of node sets pair p of holds rests on for
// property: for mutual exclusion, the nodes of a step of each hold (that
// granted or extended it) in force together at a moment of the holds'
// overlap — each held its hold's key then, so every such pair counts; for
// token order and uniqueness, the nodes that made each token. known is
// false when neither hold's nodes are known: the pair is then blamed by
// its window alone.
func (b *blamer) quorumPairs(property Property, p holdPair) (sets []setPair, known bool) {
	if property != MutualExclusion {
		qa, okA := b.tokenSets[p.a]
		qb, okB := b.tokenSets[p.b]
		return []setPair{{qa, qb}}, okA || okB
	}
	sa, okA := b.quorums[p.a]
	sb, okB := b.quorums[p.b]
	if !okA && !okB {
		return nil, false
	}
	if !okA {
		sa = []quorumStep{{from: p.from, until: forever}}
	}
	if !okB {
		sb = []quorumStep{{from: p.from, until: forever}}
	}
	var all []setPair
	for _, x := range sa {
		for _, y := range sb {
			all = append(all, setPair{x.nodes, y.nodes})
			if max(x.from, y.from, p.from) < min(x.until, y.until, p.end) {
				sets = append(sets, setPair{x.nodes, y.nodes})
			}
		}
	}
	// No moment with a step of each in force (a hold recorded oddly, say
	// an extend that returned past its validity): every pair counts.
	if len(sets) == 0 {
		sets = all
	}
	return sets, true
}
