package protomodel

// The node side: the scripts, each one atomic step on one node, and what
// happens to nodes: crash, restart with or without data, key expiry.

// runAcquire is acquire.lua (a Lock's: lease > 0): if the caller is first
// in the waiting set and SET key value NX PX ttl succeeds, INCR the counter
// and reply {1, counter}, leaving the caller's entry as it is (the attempt
// may still fail); else enter or refresh (since, id) and reply {0, pttl,
// counter, holder, head}. Expired entries are already gone (purge).
//
//go:norace
func (m *Model) runAcquire(s *State, h, i int) {
	nd := &s.nodes[i]
	sl := &nd.slots[h]
	c := h / m.cfg.Attempts
	if nd.key == 0 && m.first(s, h, i) {
		nd.key = uint8(h + 1)
		nd.counter++
		sl.granted = true
		if m.cfg.Variant == GrantRemovesEntry {
			nd.wait[c] = 0
		}
	} else {
		sl.granted = false
		nd.wait[c] = s.attempts[h].since
	}
	sl.counter = nd.counter
	if sl.acq == asked {
		sl.acq = replied
	} else {
		sl.acq = repliedLate
	}
}

// runRaise is raise.lua: only while the key holds this hold's value,
// counter = max(counter, t), and reply that it counted.
//
//go:norace
func (m *Model) runRaise(s *State, h, i int) {
	nd := &s.nodes[i]
	sl := &nd.slots[h]
	ok := nd.key == uint8(h+1) || m.cfg.Variant == RaiseWithoutOwnership
	if ok {
		nd.counter = max(nd.counter, s.attempts[h].token)
	}
	if sl.raise == raiseAsked {
		sl.raise, sl.raiseOK = raiseReplied, ok
	} else {
		sl.raise = noRaise
	}
}

// runHeal is heal.lua: counter = max(counter, t), unconditionally.
//
//go:norace
func (m *Model) runHeal(s *State, h, i int) {
	nd := &s.nodes[i]
	t := s.attempts[h].token
	if m.cfg.Variant == HealLowers {
		nd.counter = t
	} else {
		nd.counter = max(nd.counter, t)
	}
	nd.slots[h].heal = false
}

// runRelease is release.lua for a step back or a late grant (no hold
// since): delete the key only while it holds this value, and announce the
// head (a hint for liveness, not modelled). The waiting set is left alone:
// the caller may still wait. Its purge is already done.
//
//go:norace
func (m *Model) runRelease(s *State, h, i int) {
	nd := &s.nodes[i]
	if nd.key == uint8(h+1) {
		nd.key = 0
	}
	nd.slots[h].release = false
}

// runUnlockRelease is release.lua for an Unlock (with the hold's since and
// its client's id): where it deletes the key, the client's entry goes if
// it is still the hold's (the waiter was served); an entry with another
// since stays. Nothing else: the model's clients have no next waiter to
// pass the place to. With GrantRemovesEntry, no release touches the set.
//
//go:norace
func (m *Model) runUnlockRelease(s *State, h, i int) {
	nd := &s.nodes[i]
	nd.slots[h].unlock = false
	if nd.key != uint8(h+1) {
		return
	}
	nd.key = 0
	if c := h / m.cfg.Attempts; m.cfg.Variant != GrantRemovesEntry && nd.wait[c] == s.attempts[h].since {
		nd.wait[c] = 0
	}
}

// mayExpire: node i's key may run out now. With exact clocks a key lives
// at least until the validity of the attempt that set it ran out (it was
// set at or after the attempt's start, for ttl; the validity is that minus
// the drift allowance); a key an extension refreshed or re-created, until
// the validity of that extension's epoch ran out (extend.go). Keys of
// attempts that hold no valid lock may go at any time, and so may keys of
// an earlier epoch (they live somewhat longer in truth): that only lets
// others in sooner.
//
//go:norace
func (m *Model) mayExpire(s *State, i int) bool {
	nd := &s.nodes[i]
	if nd.key == 0 {
		return false
	}
	a := &s.attempts[nd.key-1]
	if m.cfg.Timing == AnyTiming || nd.skewed || a.phase == ended {
		return true
	}
	switch nd.age {
	case ageStale:
		return true
	case agePending:
		return a.extExpired
	}
	return a.expired
}

// crash takes node i down, noting what a restart without data will need.
//
//go:norace
func (m *Model) crash(s *State, i int) {
	nd := &s.nodes[i]
	nd.up, nd.healed, nd.inflight = false, m.othersKeepTop(s, i), 0
	for h := range m.cfg.Clients * m.cfg.Attempts {
		if p := s.attempts[h].phase; p == acquiring || p == raising {
			nd.inflight |= 1 << h
		}
	}
	s.crashes++
}

// restartEmpty brings node i back without its data (amnesia).
//
//go:norace
func (m *Model) restartEmpty(s *State, i int) {
	nd := &s.nodes[i]
	nd.up, nd.healed, nd.inflight, nd.key, nd.age, nd.counter = true, false, 0, 0, ageCurrent, 0
	for x := range m.cfg.Clients {
		m.loseEntry(s, i, x)
	}
}

// othersKeepTop: the nodes other than i keep the highest counter on a
// quorum, so i's counter is not the only durable record of a token.
//
//go:norace
func (m *Model) othersKeepTop(s *State, i int) bool {
	var top uint8
	for j := range m.cfg.Nodes {
		top = max(top, s.nodes[j].counter)
	}
	others := 0
	for j := range m.cfg.Nodes {
		if j != i && s.nodes[j].counter == top {
			others++
		}
	}
	return others >= m.cfg.quorum()
}

// mayForget: node i, down, may come back empty now. The assumption under
// which the token outlives amnesia:
//   - delayed restart: it stays down until its key, if any, has expired and
//     every acquisition that was in flight when it crashed has decided;
//   - healed: when it crashed, the other nodes kept the highest counter on
//     a quorum (the heals of the last acquisitions had landed).
//
// A variant drops one half. Without a timing assumption (AnyTiming) there is
// no delayed restart: counters must be durable, and only the amnesia
// variants bring a node back empty.
//
//go:norace
func (m *Model) mayForget(s *State, i int) bool {
	nd := &s.nodes[i]
	v := m.cfg.Variant
	if m.cfg.Timing == AnyTiming && v != AmnesiaUnhealed && v != AmnesiaEarly {
		return false
	}
	if nd.key != 0 && !m.mayExpire(s, i) && !(m.cfg.Rolling && m.keptElsewhere(s, i)) {
		return false
	}
	if v != AmnesiaEarly {
		for h := range m.cfg.Clients * m.cfg.Attempts {
			if p := s.attempts[h].phase; nd.inflight&(1<<h) != 0 && (p == acquiring || p == raising) {
				return false
			}
		}
	}
	return nd.healed || v == AmnesiaUnhealed
}

// mayLoseCounter: node i may still come back empty in this run.
//
//go:norace
func mayLoseCounter(c *Config, s *State, i int) bool {
	if c.Timing == AnyTiming && c.Variant != AmnesiaUnhealed && c.Variant != AmnesiaEarly {
		return false
	}
	return !s.nodes[i].up || int(s.crashes) < c.Crashes
}

// keptElsewhere: the hold whose key is on node i has no extension
// deciding (one that counted i's yes would count a key that is gone), and
// keeps a key that may not expire yet on a quorum of the other nodes.
//
//go:norace
func (m *Model) keptElsewhere(s *State, i int) bool {
	k, n := s.nodes[i].key, 0
	if s.attempts[k-1].extending && m.cfg.Variant != RollingMidExtension {
		return false
	}
	for j := range m.cfg.Nodes {
		if j != i && s.nodes[j].key == k && !m.mayExpire(s, j) {
			n++
		}
	}
	return n >= m.cfg.quorum()
}

// allUp: no node is down (a rolling restart takes one node at a time).
//
//go:norace
func (m *Model) allUp(s *State) bool {
	for i := range m.cfg.Nodes {
		if !s.nodes[i].up {
			return false
		}
	}
	return true
}
