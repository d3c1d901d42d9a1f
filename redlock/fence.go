package redlock

import (
	"context"
	"slices"
	"strconv"
)

// fence computes the token from the grants (docs/protocol.md, "Fencing
// tokens"; why the token is ordered and unique: Claims 1 and 2 there).
// Fast path: a quorum of grants already agree on the highest counter t.
// Otherwise the lagging grants are raised to t, each only while this hold
// still owns the key there; the token is t if that makes a quorum. counted
// are the nodes that make it: those at t and those raised.
func (a *attempt) fence(grants []reply) (token uint64, counted []int, ok bool) {
	var t uint64
	for _, g := range grants {
		t = max(t, g.counter)
	}
	var at int
	var lagging []int
	for _, g := range grants {
		if g.counter == t {
			at++
			counted = append(counted, g.node)
		} else {
			lagging = append(lagging, g.node)
		}
	}
	if at >= a.c.quorum {
		return t, counted, true
	}
	raised, _, _, _ := a.c.fanout(context.Background(), lagging, a.c.quorum-at, a.timeout(),
		raiseScript, a.keys, a.value, strconv.FormatUint(t, 10))
	counted = append(counted, raised...)
	slices.Sort(counted)
	return t, counted, at+len(raised) >= a.c.quorum
}
