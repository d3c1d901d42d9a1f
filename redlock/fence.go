package redlock

import (
	"context"
	"strconv"
)

// fence computes the token from the grants (docs/protocol.md, "Fencing
// tokens"; why the token is ordered and unique: Claims 1 and 2 there).
// Fast path: a quorum of grants already agree on the highest counter t.
// Otherwise the lagging grants are raised to t, each only while this hold
// still owns the key there; the token is t if that makes a quorum.
func (a *attempt) fence(grants []reply) (uint64, bool) {
	var t uint64
	for _, g := range grants {
		t = max(t, g.counter)
	}
	var at int
	var lagging []int
	for _, g := range grants {
		if g.counter == t {
			at++
		} else {
			lagging = append(lagging, g.node)
		}
	}
	if at >= a.c.quorum {
		return t, true
	}
	raised, _, _, _ := a.c.fanout(context.Background(), lagging, a.c.quorum-at, a.timeout(),
		raiseScript, a.keys, a.value, strconv.FormatUint(t, 10))
	return t, at+raised >= a.c.quorum
}
