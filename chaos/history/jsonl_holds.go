package history

import (
	"cmp"
	"container/heap"
	"time"
)

// holder is who got a hold: the client, the key and the token, by which the
// ops of the hold name it.
type holder struct {
	client int
	key    string
	token  uint64
}

// holdIndex finds the hold an op names: the latest successful acquire by the
// same holder that returned before the op was invoked (the later line among
// equal returns). It is asked in order of invocation, so an acquire, once
// returned before one op, is before every later op: each holder keeps its
// acquires not yet returned in a heap by return, and the latest returned.
// Each acquire is pushed and popped once: O(log n) per op.
type holdIndex map[holder]*holdsOf

type holdsOf struct {
	pending returns // not yet returned before the last op asked
	latest  *grant
}

// grant is a successful acquire: its op ID (in order of invocation, then
// line), return and value.
type grant struct {
	id       int
	complete time.Duration
	value    string
}

// after reports whether a returned after b, or with it and on a later op.
func (a *grant) after(b *grant) bool {
	return cmp.Or(cmp.Compare(a.complete, b.complete), cmp.Compare(a.id, b.id)) > 0
}

// add records the successful acquire op.
func (x holdIndex) add(op Op) {
	hk := holder{op.Client, op.Key, op.Token}
	hs := x[hk]
	if hs == nil {
		hs = &holdsOf{}
		x[hk] = hs
	}
	heap.Push(&hs.pending, &grant{id: op.ID, complete: op.Complete, value: op.Value})
}

// find returns the hold op names, nil when there is none. Ops must be asked
// in order of invocation.
func (x holdIndex) find(op Op) *grant {
	hs := x[holder{op.Client, op.Key, op.Token}]
	if hs == nil {
		return nil
	}
	for len(hs.pending) > 0 && hs.pending[0].complete <= op.Invoke {
		a := heap.Pop(&hs.pending).(*grant)
		if hs.latest == nil || a.after(hs.latest) {
			hs.latest = a
		}
	}
	return hs.latest
}

// returns is a min-heap of acquires by return.
type returns []*grant

func (r returns) Len() int           { return len(r) }
func (r returns) Less(i, j int) bool { return r[j].after(r[i]) }
func (r returns) Swap(i, j int)      { r[i], r[j] = r[j], r[i] }
func (r *returns) Push(x any)        { *r = append(*r, x.(*grant)) }
func (r *returns) Pop() any {
	old := *r
	a := old[len(old)-1]
	*r = old[:len(old)-1]
	return a
}
