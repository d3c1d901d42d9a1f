package history

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// history assembles the lines read into a History: times made offsets from
// the start, clients numbered, ops ordered and numbered, holds linked.
func (p *parser) history() (History, error) {
	origin := p.origin()
	var h History
	var last time.Duration
	for i := range p.ops {
		l := &p.ops[i]
		inv, err := offset(l.n, "invoke_ns", int64(l.op.Invoke), origin)
		if err != nil {
			return History{}, err
		}
		comp := inv
		if l.op.Outcome != Pending {
			if comp, err = offset(l.n, "complete_ns", int64(l.op.Complete), origin); err != nil {
				return History{}, err
			}
		}
		if l.hasValid {
			if l.op.ValidUntil, err = offset(l.n, "valid_until_ns", int64(l.op.ValidUntil), origin); err != nil {
				return History{}, err
			}
		}
		l.op.Invoke, l.op.Complete = inv, comp
		if l.op.Outcome == Pending {
			l.op.Complete = 0
		}
		last = max(last, comp)
	}
	h.End = last
	if p.run != nil {
		h.Nodes = p.run.nodes
		if p.run.end != nil {
			end, err := offset(p.run.n, "end_ns", *p.run.end, origin)
			if err != nil {
				return History{}, err
			}
			if end < last {
				return History{}, &LineError{Line: p.run.n, Field: "end_ns",
					Err: fmt.Errorf("%d is before the last time of the history (%d)", *p.run.end, int64(last)+origin)}
			}
			h.End = end
		}
	}
	p.sort()
	h.Clients = p.clients()
	if err := p.link(&h); err != nil {
		return History{}, err
	}
	if len(p.stores) > 0 {
		h.Final = make(map[string][]string, len(p.stores))
		for _, s := range p.stores {
			h.Final[s.op.Resource] = s.entries
		}
	}
	if err := validate(h); err != nil { // the lines are checked: a bug if it happens
		return History{}, fmt.Errorf("history: %w", err)
	}
	return h, nil
}

// origin is the run line's start_ns, or else the earliest invocation, or
// else 0.
func (p *parser) origin() int64 {
	if p.run != nil && p.run.start != nil {
		return *p.run.start
	}
	if len(p.ops) == 0 {
		return 0
	}
	o := int64(p.ops[0].op.Invoke)
	for _, l := range p.ops {
		o = min(o, int64(l.op.Invoke))
	}
	return o
}

// offset returns t - origin, or an error naming the line and field when t
// is before the origin or too far after it.
func offset(n int, field string, t, origin int64) (time.Duration, error) {
	if t < origin {
		return 0, &LineError{Line: n, Field: field, Err: fmt.Errorf("%d is before the start of the history (%d)", t, origin)}
	}
	if d := uint64(t) - uint64(origin); d <= uint64(maxSpan) { // no overflow: t >= origin
		return time.Duration(d), nil
	}
	return 0, &LineError{Line: n, Field: field, Err: fmt.Errorf("%d is more than %v after the start of the history (%d)",
		t, time.Duration(maxSpan).Round(time.Hour), origin)}
}

// clients numbers the clients, in place. When every client is a number, the
// numbers are the indexes and there are no names; otherwise each name (a
// number counts as its decimal name) gets the next index on its first
// appearance in op order, and the names are returned.
func (p *parser) clients() []string {
	numeric := true
	for _, l := range p.ops {
		if l.client != "" && !l.numeric {
			numeric = false
		}
	}
	idx := map[string]int{}
	var names []string
	for i := range p.ops {
		l := &p.ops[i]
		if l.client == "" {
			continue
		}
		c, seen := idx[l.client]
		switch {
		case numeric:
			c, _ = strconv.Atoi(l.client) // checked by clientOf
		case !seen:
			c = len(names)
			idx[l.client] = c
			names = append(names, l.client)
		}
		l.op.Client = c
	}
	return names
}

// sort orders the ops by invocation, acquires first among equal times (an
// op of a hold may be invoked the moment its acquire returned), then by line.
func (p *parser) sort() {
	// Sorting the positions, then moving each line once, spares moving the
	// large lines at every swap.
	order := make([]int, len(p.ops))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(i, j int) int {
		a, b := &p.ops[i], &p.ops[j]
		return cmp.Or(cmp.Compare(a.op.Invoke, b.op.Invoke),
			cmp.Compare(rank(a.op.Kind), rank(b.op.Kind)), cmp.Compare(a.n, b.n))
	})
	// Position i takes the line at order[i]: follow each cycle of that
	// permutation, in place.
	for i := range order {
		if order[i] == i {
			continue
		}
		held := p.ops[i]
		j := i
		for order[j] != i {
			k := order[j]
			p.ops[j], order[j] = p.ops[k], j
			j = k
		}
		p.ops[j], order[j] = held, j
	}
}

// link numbers the sorted ops and links each op of a hold to its acquire.
func (p *parser) link(h *History) error {
	holds := holdIndex{} // successful acquires, by who got which token
	h.Ops = make([]Op, 0, len(p.ops))
	for _, l := range p.ops {
		op := l.op
		op.ID = len(h.Ops) + 1
		switch op.Kind {
		case KindAcquire:
			if op.Outcome == OK {
				holds.add(op)
			}
		case KindExtend, KindRelease, KindWrite, KindLost:
			hold := holds.find(op)
			if hold == nil {
				return &LineError{Line: l.n, Field: "token", Err: fmt.Errorf(
					"no successful acquire of %q by client %s with token %d returned before this %s was invoked",
					op.Key, l.client, op.Token, op.Kind)}
			}
			op.Hold = hold.id
			if op.Value == "" {
				op.Value = hold.value
			}
		}
		h.Ops = append(h.Ops, op)
	}
	return nil
}

// rank orders ops invoked at the same time: acquires before the ops that
// may name them.
func rank(k Kind) int {
	if k == KindAcquire {
		return 0
	}
	return 1
}
