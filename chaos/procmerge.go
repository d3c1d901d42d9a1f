package chaos

import (
	"cmp"
	"slices"

	"github.com/fencedlock/fencedlock/chaos/history"
)

// merge returns h, Run's own history (node faults, client-pause stops, the
// store), with the ops of every client process added, all ordered by
// invocation (acquires first among equals, as history.ReadJSONL orders
// them) and numbered in that order, each hold's ops naming their acquire by
// its new ID. Call it once the processes ended.
func (s *procSet) merge(h history.History) history.History {
	type ref struct{ proc, id int } // proc -1: h's own
	ops := make([]history.Op, 0, len(h.Ops))
	refs := make([]ref, 0, len(h.Ops))
	for _, op := range h.Ops {
		ops, refs = append(ops, op), append(refs, ref{-1, op.ID})
	}
	for i, p := range s.procs {
		p.mu.Lock()
		for _, id := range p.order {
			ops, refs = append(ops, p.ops[id]), append(refs, ref{i, id})
		}
		p.mu.Unlock()
	}
	idx := make([]int, len(ops))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		return cmp.Or(cmp.Compare(ops[a].Invoke, ops[b].Invoke), cmp.Compare(acquireFirst(ops[a]), acquireFirst(ops[b])))
	})
	newID := make(map[ref]int, len(ops))
	for n, i := range idx {
		newID[refs[i]] = n + 1
	}
	merged := make([]history.Op, len(ops))
	for n, i := range idx {
		op := ops[i]
		op.ID = n + 1
		if op.Hold != 0 {
			op.Hold = newID[ref{refs[i].proc, op.Hold}]
		}
		h.End = max(h.End, op.Invoke, op.Complete)
		merged[n] = op
	}
	h.Ops = merged
	return h
}

func acquireFirst(op history.Op) int {
	if op.Kind == history.KindAcquire {
		return 0
	}
	return 1
}
