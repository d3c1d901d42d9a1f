package history

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// history assembles the lines read into a History: times made offsets from
// the start, clients numbered, ops ordered and numbered, holds linked. What
// the current rules refuse is the error of a current history, and a warning
// of a version 1 one.
func (p *parser) history() (History, []Warning, error) {
	p.refuseRepeatedEntries() // before build sorts the ops: in line order
	p.refuseUnknownNodes()
	h, err := p.build()
	if err != nil {
		return History{}, nil, err
	}
	slices.SortStableFunc(p.refused, func(a, b *LineError) int { return cmp.Compare(a.Line, b.Line) })
	if h.Version != 1 {
		if len(p.refused) > 0 {
			return History{}, nil, p.refused[0]
		}
		return h, nil, nil
	}
	warnings := []Warning{{Msg: fmt.Sprintf("no version on the run line: read as version 1, by rules that are not sound "+
		"(a lost extend does not end its hold; repeated entries, repeated fields, faults on nodes that do not exist "+
		"and names that do not read back as written pass); write \"version\":%d and the current rules apply", FormatVersion)}}
	for _, e := range p.refused {
		warnings = append(warnings, Warning{Line: e.Line, Field: e.Field, Msg: e.Err.Error()})
	}
	return h, warnings, nil
}

// build makes the History of the lines read.
func (p *parser) build() (History, error) {
	origin := p.origin()
	h := History{Version: 1}
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
		r := p.run.run
		if r.version != nil && *r.version > 1 {
			h.Version = 0 // the current rules
		}
		if r.nodes != nil {
			h.Nodes = int(*r.nodes)
		}
		if r.clockError != nil {
			h.ClockError = time.Duration(*r.clockError)
		}
		if r.end != nil {
			end, err := offset(p.run.n, "end_ns", *r.end, origin)
			if err != nil {
				return History{}, err
			}
			if end < last {
				return History{}, &LineError{Line: p.run.n, Field: "end_ns",
					Err: fmt.Errorf("%d is before the last time of the history (%d)", *r.end, int64(last)+origin)}
			}
			h.End = end
		}
	}
	if err := p.checkGranted(h.Nodes); err != nil {
		return History{}, err
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
	if err := h.Validate(); err != nil { // the lines are checked: a bug if it happens
		return History{}, fmt.Errorf("history: %w", err)
	}
	return h, nil
}

// origin is the run line's start_ns, or else the earliest invocation, or
// else 0.
func (p *parser) origin() int64 {
	if p.run != nil && p.run.run.start != nil {
		return *p.run.run.start
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
		case KindExtend, KindRelease, KindWrite, KindLost, KindProbe:
			if op.Kind == KindProbe && op.Token == 0 {
				break // a probe after a failed acquire names no hold
			}
			hold := holds.find(op)
			if hold == nil {
				return &LineError{Line: l.n, Field: "token", Err: fmt.Errorf(
					"no successful acquire of %q by client %s with token %d returned before this %s was invoked",
					op.Key, l.client, op.Token, op.Kind)}
			}
			op.Hold = hold.id
			if op.Value == "" && op.Kind != KindProbe { // a probe's value is the one it found
				op.Value = hold.value
			}
		}
		h.Ops = append(h.Ops, op)
	}
	return nil
}

// refuseRepeatedEntries refuses a write whose entry, or whose store sequence
// number, an earlier line wrote to the same resource (p.ops still in line
// order): entries are unique, so that a store holding one copy cannot
// account for two acknowledged writes, and a store numbers each write once,
// so that its order is one order.
func (p *parser) refuseRepeatedEntries() {
	type write struct{ resource, entry string }
	first := make(map[write]int) // line
	for _, l := range p.ops {    // in line order
		if l.op.Kind != KindWrite {
			continue
		}
		w := write{l.op.Resource, l.op.Entry}
		if n, seen := first[w]; seen {
			p.refused = append(p.refused, &LineError{Line: l.n, Field: "entry",
				Err: fmt.Errorf("%q was written to %q already (line %d): entries are unique", w.entry, w.resource, n)})
			continue
		}
		first[w] = l.n
		if l.op.Seq == 0 {
			continue
		}
		s := write{l.op.Resource, fmt.Sprint("seq ", l.op.Seq)}
		if n, seen := first[s]; seen {
			p.refused = append(p.refused, &LineError{Line: l.n, Field: "seq",
				Err: fmt.Errorf("%d is the sequence number of another write to %q (line %d): a store numbers its writes once", l.op.Seq, w.resource, n)})
			continue
		}
		first[s] = l.n
	}
}

// refuseUnknownNodes refuses a fault or a probe on a node the run line does
// not count.
func (p *parser) refuseUnknownNodes() {
	if p.run == nil || p.run.run.nodes == nil {
		return
	}
	nodes := int(*p.run.run.nodes)
	for _, l := range p.ops {
		if (l.op.Kind == KindProbe || l.op.Kind == KindFault && !l.op.Fault.ClientSide()) && l.op.Node >= nodes {
			p.refused = append(p.refused, &LineError{Line: l.n, Field: "node",
				Err: fmt.Errorf("%d is not a node of the run (it has %d: 0 to %d)", l.op.Node, nodes, nodes-1)})
		}
	}
}

// rank orders ops invoked at the same time: acquires before the ops that
// may name them.
func rank(k Kind) int {
	if k == KindAcquire {
		return 0
	}
	return 1
}
