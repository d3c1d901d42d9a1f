package chaos

import (
	"cmp"
	"slices"
	"time"

	"github.com/fencedlock/fencedlock/chaos/history"
)

// merge returns h, Run's own history (node faults, client-pause stops, the
// store), with the ops of every client process added, all ordered by
// invocation (acquires first among equals, as history.ReadJSONL orders
// them) and numbered in that order, each hold's ops naming their acquire by
// its new ID, and the history's clock error set to the bound of the merge.
// Call it once the processes ended.
//
// Each recorder's start, Run's and every process's, is known on the shared
// clock to within its startErr; an op of process i lands on Run's clock off
// by its start's error less Run's. Two ops of processes i and j thus
// disagree by at most startErr_i + startErr_j (Run's error cancels), an op
// of process i and one of Run's own by startErr_i + Run's startErr: the
// bound is the greatest process error plus the greater of the second
// greatest and Run's.
func (s *procSet) merge(h history.History) history.History {
	var worst, second time.Duration // the two greatest process errors
	for _, p := range s.procs {
		if e := p.startErr; e > worst {
			worst, second = e, worst
		} else if e > second {
			second = e
		}
	}
	if len(s.procs) > 0 {
		h.ClockError = max(h.ClockError, worst+max(second, s.startErr))
	}
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
