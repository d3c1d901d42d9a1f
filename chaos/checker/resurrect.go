package checker

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/fencedlock/fencedlock/chaos/history"
)

// resurrectedHolds finds holds that a successful extension brought back
// after another hold of the same key had been acquired past their validity.
//
// Let B be a successful acquire of the key that returned after hold H's
// validity end (as raised by H's earlier extensions). B was granted by a
// quorum, each node of which had no key of H's when it granted; no node
// grants H's value again afterwards (H's acquisition is over), so from then
// on a quorum lacks H's key. An extension of H that began after B returned
// needs H's key on a quorum, which intersects B's: it must fail. If it
// succeeds, the extension put back a key that had gone — the lock
// re-creates vanished keys — and H's holder goes on believing it holds the
// lock next to B's. No assumption on clocks enters: it rests on the quorums
// alone, and holds under every fault that keeps the faulty nodes to a
// minority (a node that loses its data loses H's key, and gives nothing
// back). DefaultExpected still excuses it under faults that lose data.
//
// An extension counts as begun at its invocation, or earlier when the
// validity it returned says so: a validity of U after an extension means the
// extension began by U minus the hold's lease at the latest (the lease: the
// acquire's validity end less its invocation). That covers extensions
// recorded when they were seen rather than made (an automatic one).
//
// A lock that re-creates vanished keys on purpose (fencedlock with
// redlock.WithReacquireOnExtend) may do so only within the validity: past
// it, another hold may have been granted by the nodes it would re-create,
// and no other hold need have come for the holder to believe wrongly that
// it still holds the lock. When the history records the re-creates
// (history.Op.Reacquired), a successful extension that recorded some and
// began after its hold's validity end is a resurrected hold too, with no
// other acquire in between. Re-creates recorded on an extension that did
// not succeed are not judged: they may be the late answers of an earlier
// extension, recorded with the next one whenever it came (see
// history.Op.Reacquired), and the holder believes nothing of them.
func resurrectedHolds(h history.History) []Violation {
	byKey := make(map[string][]history.Op) // successful acquires by key, by completion
	for _, op := range acquired(h) {
		byKey[op.Key] = append(byKey[op.Key], op)
	}
	for _, ops := range byKey {
		slices.SortFunc(ops, func(a, b history.Op) int { return cmp.Compare(a.Complete, b.Complete) })
	}
	valid := make(map[int]time.Duration) // hold -> validity end so far
	var vs []Violation
	for _, e := range h.Ops {
		if e.Kind != history.KindExtend || e.Outcome != history.OK || e.Hold == 0 {
			continue
		}
		a := h.Ops[e.Hold-1]
		v, ok := valid[a.ID]
		if !ok {
			v = a.ValidUntil
		}
		if v == 0 || a.ValidUntil == 0 {
			continue // no validity: nothing to outlive
		}
		valid[a.ID] = max(v, e.ValidUntil)
		began := e.Invoke
		if e.ValidUntil != 0 {
			began = min(began, e.ValidUntil-(a.ValidUntil-a.Invoke))
		}
		ops := byKey[a.Key]
		i, _ := slices.BinarySearchFunc(ops, v, func(op history.Op, t time.Duration) int {
			return cmp.Compare(op.Complete, t+1) // the first that returned after v
		})
		found := false
		for ; i < len(ops) && ops[i].Complete < began; i++ {
			if b := ops[i]; b.ID != a.ID {
				vs = append(vs, Violation{
					Property: ResurrectedHold, Key: a.Key,
					Ops: []int{a.ID, b.ID}, Clients: []int{a.Client, b.Client},
					Start: b.Complete, End: e.Complete, Since: min(v, b.Invoke),
					Detail: fmt.Sprintf("hold %d (client %d, token %d) extended by op %d after its validity ended and acquire %d (client %d, token %d) returned",
						a.ID, a.Client, a.Token, e.ID, b.ID, b.Client, b.Token),
				})
				found = true
				break
			}
		}
		if !found && len(e.Reacquired) > 0 && began > v {
			vs = append(vs, Violation{
				Property: ResurrectedHold, Key: a.Key,
				Ops: []int{a.ID, e.ID}, Clients: []int{a.Client},
				Start: began, End: e.Complete, Since: v,
				Detail: fmt.Sprintf("hold %d (client %d, token %d) extended by op %d, which began %v after its validity ended and re-created its key on nodes %v",
					a.ID, a.Client, a.Token, e.ID, (began - v).Round(time.Microsecond), e.Reacquired),
			})
		}
	}
	return sortViolations(vs)
}
