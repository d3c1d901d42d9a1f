package protomodel

import "math/bits"

// The waiting set: on each node, per key, one entry per client,
// ordered by (wait start, client id); acquire grants only to a caller that
// no other client's entry is older than, and a refused Lock try enters or
// refreshes its client's entry. A grant leaves the entry as it is; the
// Unlock of the hold ends it where it deletes the key (node.go). Wait starts
// are logical: a since rank, 1 for the oldest wait still in play, and a new
// wait is younger than every wait begun before it (exact clocks, so the
// order of wait starts is the real-time one). Two waits never share a start,
// so the client id never breaks a tie; the order is total all the same.
//
// The fairness check (Claim 6) follows each pair of waiting clients: when b
// begins waiting, guard[b][a] is the set of nodes that hold a's entry, if
// they are a quorum; a node leaves it when a's entry leaves the node in a
// way the form checked (Config.Fairness) allows as an excuse — for the
// claim, a lease running out or an empty restart. b returning a Lock while
// guard[b][a] still names a quorum is a violation: a was older, and its
// entry was on every node of a quorum since b began.

// precedes: wait start x of client cx comes no later than y of client cy
// in the order (since, id).
//
//go:norace
func precedes(x uint8, cx int, y uint8, cy int) bool {
	return x < y || x == y && cx <= cy
}

// first is acquire's test: the oldest entry other than the caller's own
// (the head) is missing or younger than the caller (an older caller is
// first even where it has no entry; its own entry, of this wait or an
// older one, never stands in its way).
//
//go:norace
func (m *Model) first(s *State, h, i int) bool {
	if m.cfg.Variant == Barging {
		return true
	}
	c := h / m.cfg.Attempts
	hd := m.head(&s.nodes[i], c)
	return hd < 0 || precedes(s.attempts[h].since, c, s.nodes[i].wait[hd], hd)
}

// head is the client of nd's oldest entry other than client but's, or -1.
//
//go:norace
func (m *Model) head(nd *node, but int) int {
	hd := -1
	for x := range m.cfg.Clients {
		if w := nd.wait[x]; x != but && w != 0 && (hd < 0 || precedes(w, x, nd.wait[hd], hd)) {
			hd = x
		}
	}
	return hd
}

// beginWait gives try h its wait start: its client's, for a retry (Lock
// trying again), else a new wait, younger than all. A new wait ends the
// client's previous one (it gave up) and starts the fairness guards of
// every client that waits now.
//
//go:norace
func (m *Model) beginWait(s *State, h int, retry bool) {
	c := h / m.cfg.Attempts
	a := &s.attempts[h]
	if retry {
		a.since = s.waits[c]
		s.retries++
		return
	}
	var young uint8
	for x := range m.cfg.Clients {
		young = max(young, s.waits[x])
		for i := range m.cfg.Nodes {
			young = max(young, s.nodes[i].wait[x])
		}
	}
	for e := range m.cfg.Clients * m.cfg.Attempts {
		young = max(young, s.attempts[e].since)
	}
	a.since = young + 1
	m.endWait(s, c)
	s.waits[c] = a.since
	for x := range m.cfg.Clients {
		if x == c || s.waits[x] == 0 {
			continue
		}
		on := m.entryNodes(s, x)
		if bits.OnesCount8(on) < m.cfg.quorum() {
			continue
		}
		if m.cfg.Fairness == AnyQuorum || m.cfg.Fairness == OnceQuorum {
			on = 1<<m.cfg.Nodes - 1 // a flag: the node set does not matter
		}
		s.guard[c][x] = on
	}
}

// endWait: client c no longer waits (it returned a Lock, or gave up).
//
//go:norace
func (m *Model) endWait(s *State, c int) {
	s.waits[c] = 0
	for x := range m.cfg.Clients {
		s.guard[c][x], s.guard[x][c] = 0, 0
	}
}

// won is checked when try h returns a Lock: its client must not overtake
// a guarded older waiter. Then its wait ends.
//
//go:norace
func (m *Model) won(s *State, h int) {
	c := h / m.cfg.Attempts
	for x := range m.cfg.Clients {
		if s.guard[c][x] != 0 && s.bad == fine {
			s.bad = badUnfair
		}
	}
	m.endWait(s, c)
}

// entryNodes: the nodes that hold client c's entry of its current wait.
//
//go:norace
func (m *Model) entryNodes(s *State, c int) uint8 {
	var on uint8
	for i := range m.cfg.Nodes {
		if w := s.nodes[i].wait[c]; w != 0 && w == s.waits[c] {
			on |= 1 << i
		}
	}
	return on
}

// loseEntry: node i loses client x's entry to a fault (its lease ran out,
// the node restarted empty), which excuses the node under the claim.
//
//go:norace
func (m *Model) loseEntry(s *State, i, x int) {
	s.nodes[i].wait[x] = 0
	if m.cfg.Fairness == KeptQuorum {
		for b := range m.cfg.Clients {
			s.guard[b][x] &^= 1 << i
		}
	}
}

// plainUnlocks: an Unlock's release that can no longer find the hold's
// entry on its node (the entry is not the hold's, and no acquire call that
// could enter it is still to run there) is a step back's release; so the
// hold's wait start need not be kept for it.
//
//go:norace
func (m *Model) plainUnlocks(s *State) {
	c := &m.cfg
	for h := range c.Clients * c.Attempts {
		cl := h / c.Attempts
		since := s.attempts[h].since
		for i := range c.Nodes {
			nd := &s.nodes[i]
			sl := &nd.slots[h]
			if !sl.unlock || sl.acq == asked { // queued behind the acquire
				continue
			}
			if c.Variant != GrantRemovesEntry && nd.wait[cl] == since && since != 0 {
				continue
			}
			entering := false
			for k := range c.Attempts {
				e := cl*c.Attempts + k
				if acq := nd.slots[e].acq; s.attempts[e].since == since && (acq == asked || acq == askedLate) {
					entering = true
				}
			}
			if !entering || c.Variant == GrantRemovesEntry {
				sl.unlock, sl.release = false, true
			}
		}
	}
}

// tidyWaits, after every step: the guards lose the nodes whose entry left
// (as the form checked says), and wait starts are renumbered 1, 2, … in
// their order, forgetting those nothing will read again.
//
//go:norace
func (m *Model) tidyWaits(s *State) {
	c := &m.cfg
	for b := range c.Clients {
		for x := range c.Clients {
			g := &s.guard[b][x]
			if *g == 0 {
				continue
			}
			on := m.entryNodes(s, x)
			switch c.Fairness {
			case KeptQuorum:
				// loseEntry took out the nodes a fault excused.
			case FixedQuorum:
				*g &= on
			case AnyQuorum:
				if bits.OnesCount8(on) < c.quorum() {
					*g = 0
				}
			}
			if bits.OnesCount8(*g) < c.quorum() {
				*g = 0
			}
		}
	}
	m.plainUnlocks(s)
	var used uint64 // bit r: rank r in use
	for h := range c.Clients * c.Attempts {
		a := &s.attempts[h]
		if a.phase == ended || a.phase == unstarted {
			pending := false // an acquire or an Unlock's release yet to run carries it
			for i := range c.Nodes {
				sl := &s.nodes[i].slots[h]
				if sl.acq == asked || sl.acq == askedLate || sl.unlock {
					pending = true
				}
			}
			if !pending {
				a.since = 0
			}
		}
		used |= 1 << a.since
	}
	for x := range c.Clients {
		used |= 1 << s.waits[x]
		for i := range c.Nodes {
			used |= 1 << s.nodes[i].wait[x]
		}
	}
	var rank [64]uint8
	r := uint8(0)
	for v := 1; v < 64; v++ {
		if used&(1<<v) != 0 {
			r++
			rank[v] = r
		}
	}
	for h := range c.Clients * c.Attempts {
		s.attempts[h].since = rank[s.attempts[h].since]
	}
	for x := range c.Clients {
		s.waits[x] = rank[s.waits[x]]
		for i := range c.Nodes {
			s.nodes[i].wait[x] = rank[s.nodes[i].wait[x]]
		}
	}
}
