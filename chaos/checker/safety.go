package checker

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/fencedlock/fencedlock/chaos/history"
)

// mutualExclusion finds holds of the same key that overlap by more than eps,
// the history's clock error (an overlap no longer than that may be the
// clocks'). Holds are swept in order of start against the earlier hold that reaches
// furthest, so each hold that begins inside another counts once.
func mutualExclusion(spans []Span, eps time.Duration) []Violation {
	var vs []Violation
	for key, ss := range byKey(spans, func(s Span) string { return s.Key }) {
		slices.SortFunc(ss, func(a, b Span) int {
			return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(a.Acquire, b.Acquire))
		})
		var far *Span // the hold so far that ends last
		for i := range ss {
			s := &ss[i]
			if s.End <= s.Start {
				continue
			}
			// The overlap with far, the earlier hold reaching furthest, is
			// the greatest s has with any earlier hold; it ends at the
			// earlier end of the two (s may end inside far).
			if far != nil && min(far.End, s.End)-s.Start > eps {
				end := min(far.End, s.End)
				vs = append(vs, Violation{
					Property: MutualExclusion, Key: key,
					Ops: []int{far.Acquire, s.Acquire}, Clients: []int{far.Client, s.Client},
					Start: s.Start, End: end, Since: min(far.Invoke, s.Invoke),
					Detail: fmt.Sprintf("hold %d (client %d, token %d) and hold %d (client %d, token %d) overlap for %v",
						far.Acquire, far.Client, far.Token, s.Acquire, s.Client, s.Token, end-s.Start),
				})
			}
			if far == nil || s.End > far.End {
				far = s
			}
		}
	}
	return sortViolations(vs)
}

// fencingOrder finds acquires B of a key that started after an acquire A of
// the same key had returned, by more than the history's clock error (no
// less, and the clocks may have the two the other way round), yet got a
// token no greater than A's. Each B counts once, against the greatest token
// returned before it started.
func fencingOrder(h history.History) []Violation {
	var vs []Violation
	for key, acq := range byKey(acquired(h), func(op history.Op) string { return op.Key }) {
		byInvoke := slices.SortedFunc(slices.Values(acq), func(a, b history.Op) int { return cmp.Compare(a.Invoke, b.Invoke) })
		byComplete := slices.SortedFunc(slices.Values(acq), func(a, b history.Op) int { return cmp.Compare(a.Complete, b.Complete) })
		var best *history.Op // greatest token among acquires returned so far
		j := 0
		for _, b := range byInvoke {
			for ; j < len(byComplete) && byComplete[j].Complete+h.ClockError < b.Invoke; j++ {
				if best == nil || byComplete[j].Token > best.Token {
					best = &byComplete[j]
				}
			}
			if best != nil && best.Token >= b.Token {
				vs = append(vs, Violation{
					Property: FencingOrder, Key: key,
					Ops: []int{best.ID, b.ID}, Clients: []int{best.Client, b.Client},
					Start: best.Complete, End: b.Complete, Since: best.Invoke,
					Detail: fmt.Sprintf("acquire %d (token %d) returned before acquire %d started, which got token %d",
						best.ID, best.Token, b.ID, b.Token),
				})
			}
		}
	}
	return sortViolations(vs)
}

// duplicateTokens finds successful acquires of the same key with the same
// token; each acquire after the first with a token counts once.
func duplicateTokens(h history.History) []Violation {
	var vs []Violation
	first := make(map[string]map[uint64]history.Op)
	for _, op := range acquired(h) {
		m := first[op.Key]
		if m == nil {
			m = make(map[uint64]history.Op)
			first[op.Key] = m
		}
		a, seen := m[op.Token]
		if !seen {
			m[op.Token] = op
			continue
		}
		vs = append(vs, Violation{
			Property: DuplicateTokens, Key: op.Key,
			Ops: []int{a.ID, op.ID}, Clients: []int{a.Client, op.Client},
			Start: min(a.Complete, op.Complete), End: max(a.Complete, op.Complete), Since: min(a.Invoke, op.Invoke),
			Detail: fmt.Sprintf("acquires %d and %d both got token %d", a.ID, op.ID, op.Token),
		})
	}
	return sortViolations(vs)
}

// acquired returns the successful acquires of h.
func acquired(h history.History) []history.Op {
	var ops []history.Op
	for _, op := range h.Ops {
		if op.Kind == history.KindAcquire && op.Outcome == history.OK {
			ops = append(ops, op)
		}
	}
	return ops
}

// byKey groups xs by key, keeping their order.
func byKey[T any](xs []T, key func(T) string) map[string][]T {
	m := make(map[string][]T)
	for _, x := range xs {
		m[key(x)] = append(m[key(x)], x)
	}
	return m
}

// sortViolations orders vs by start, then ops, so results do not depend on
// map iteration order.
func sortViolations(vs []Violation) []Violation {
	slices.SortFunc(vs, func(a, b Violation) int {
		return cmp.Or(cmp.Compare(a.Start, b.Start), slices.Compare(a.Ops, b.Ops))
	})
	return vs
}
