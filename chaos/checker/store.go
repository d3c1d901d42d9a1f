package checker

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/fencedlock/fencedlock/chaos/history"
)

// staleWrites finds writes the store took although a write with a greater
// token to the same resource had been taken before. A write was taken when
// the store acknowledged it, or when its entry is in the final contents (a
// write that failed, was rejected or never completed may still have landed).
// "Before" is judged three ways, and a write counts once if any finds it:
// the store's sequence numbers; real time (the greater write was
// acknowledged before the stale one was invoked); the final contents' order.
// Equal tokens are admitted by a fencing guard, so only lower ones are stale.
func staleWrites(h history.History) []Violation {
	inFinal := finalIndex(h)
	var taken []history.Op
	for _, op := range h.Ops {
		if op.Kind != history.KindWrite {
			continue
		}
		if _, ok := inFinal[op.Resource][op.Entry]; op.Outcome == history.OK || ok {
			taken = append(taken, op)
		}
	}
	found := make(map[int]Violation) // by the stale write's ID
	flag := func(earlier, w history.Op, how string) {
		if earlier.Token <= w.Token {
			return
		}
		if _, dup := found[w.ID]; dup {
			return
		}
		end := w.Complete
		if w.Outcome == history.Pending {
			end = h.End
		}
		found[w.ID] = Violation{
			Property: StaleWritesAccepted, Key: w.Resource,
			Ops: []int{earlier.ID, w.ID}, Clients: []int{earlier.Client, w.Client},
			Start: w.Invoke, End: end, Since: min(earlier.Invoke, w.Invoke),
			Detail: fmt.Sprintf("write %d (token %d) to %q taken after write %d (token %d), by %s",
				w.ID, w.Token, w.Resource, earlier.ID, earlier.Token, how),
		}
	}
	for res, ws := range byKey(taken, func(op history.Op) string { return op.Resource }) {
		// The store's own order.
		seq := slices.DeleteFunc(slices.Clone(ws), func(op history.Op) bool { return op.Seq == 0 })
		slices.SortFunc(seq, func(a, b history.Op) int { return cmp.Compare(a.Seq, b.Seq) })
		sweepMax(seq, func(best, w history.Op) { flag(best, w, "store order") })

		// Real time: only acknowledged writes are known to precede anything.
		acked := slices.DeleteFunc(slices.Clone(ws), func(op history.Op) bool { return op.Outcome != history.OK })
		slices.SortFunc(acked, func(a, b history.Op) int { return cmp.Compare(a.Complete, b.Complete) })
		byInvoke := slices.SortedFunc(slices.Values(ws), func(a, b history.Op) int { return cmp.Compare(a.Invoke, b.Invoke) })
		var best *history.Op
		j := 0
		for _, w := range byInvoke {
			for ; j < len(acked) && acked[j].Complete < w.Invoke; j++ {
				if best == nil || acked[j].Token > best.Token {
					best = &acked[j]
				}
			}
			if best != nil {
				flag(*best, w, "real time")
			}
		}

		// The final contents' order.
		var final []history.Op
		for _, e := range h.Final[res] {
			if op, ok := inFinal[res][e]; ok {
				final = append(final, h.Ops[op-1])
			}
		}
		sweepMax(final, func(best, w history.Op) { flag(best, w, "final store order") })
	}
	vs := make([]Violation, 0, len(found))
	for _, v := range found {
		vs = append(vs, v)
	}
	return sortViolations(vs)
}

// sweepMax calls f(best, w) for each w of ordered after the first, with best
// the op of greatest token before w.
func sweepMax(ordered []history.Op, f func(best, w history.Op)) {
	if len(ordered) == 0 {
		return
	}
	best := ordered[0]
	for _, w := range ordered[1:] {
		f(best, w)
		if w.Token > best.Token {
			best = w
		}
	}
}

// lostWrites finds acknowledged writes whose entry is not in the final store
// contents. It reports false when the history has no final contents.
func lostWrites(h history.History) ([]Violation, bool) {
	if h.Final == nil {
		return nil, false
	}
	inFinal := finalIndex(h)
	var vs []Violation
	for _, op := range h.Ops {
		if op.Kind != history.KindWrite || op.Outcome != history.OK {
			continue
		}
		if _, ok := inFinal[op.Resource][op.Entry]; ok {
			continue
		}
		vs = append(vs, Violation{
			Property: LostWrites, Key: op.Resource,
			Ops: []int{op.ID}, Clients: []int{op.Client},
			Start: op.Invoke, End: h.End, Since: op.Invoke,
			Detail: fmt.Sprintf("write %d (entry %q, token %d) to %q was acknowledged but is not in the store",
				op.ID, op.Entry, op.Token, op.Resource),
		})
	}
	return sortViolations(vs), true
}

// finalIndex maps, per resource, each entry of the final contents to the ID
// of the first write of that entry.
func finalIndex(h history.History) map[string]map[string]int {
	writes := make(map[string]map[string]int)
	for _, op := range h.Ops {
		if op.Kind != history.KindWrite {
			continue
		}
		if writes[op.Resource] == nil {
			writes[op.Resource] = make(map[string]int)
		}
		if _, dup := writes[op.Resource][op.Entry]; !dup {
			writes[op.Resource][op.Entry] = op.ID
		}
	}
	idx := make(map[string]map[string]int)
	for res, entries := range h.Final {
		idx[res] = make(map[string]int)
		for _, e := range entries {
			if id, ok := writes[res][e]; ok {
				idx[res][e] = id
			}
		}
	}
	return idx
}
