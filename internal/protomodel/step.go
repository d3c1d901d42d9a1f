package protomodel

// kind is the kind of a step.
type kind uint8

const (
	stepStart kind = iota
	stepAcquire
	stepReply
	stepLateReply
	stepDeadline
	stepReask
	stepGiveUp
	stepRaise
	stepRaiseReply
	stepRaiseDeadline
	stepHeal
	stepRelease
	stepUnlockRelease
	stepUnlock
	stepValidity
	stepExpire
	stepCrash
	stepRestartEmpty
	stepLease
	stepExtend
	stepExtRun
	stepExtReply
	stepExtLateReply
	stepExtDeadline
)

// step is one event: what happened, to which attempt (h), node (n), ask
// group (g). A start with g = 1 is a retry; a lease's h is a client.
type step struct {
	kind    kind
	h, n, g uint8
}

// successors calls emit with each state one step away from s. It reuses
// one State for all of them: emit must copy what it keeps.
//
//go:norace
func (m *Model) successors(s *State, emit func(step, *State)) {
	var steps [64]step
	var next State
	for _, st := range m.enabled(s, steps[:0]) {
		next = *s
		next.bad = fine
		m.apply(&next, st)
		next.tidy(m)
		emit(st, &next)
	}
}

// enabled appends to steps every step that can happen in s.
//
//go:norace
func (m *Model) enabled(s *State, steps []step) []step {
	c := &m.cfg
	na := c.Clients * c.Attempts
	// A reply to a decided attempt only settles it (heal or release, sent
	// to the wire): it commutes with every other step and changes nothing
	// a property reads, so reading it at once loses no behaviour (a
	// persistent set of one step, in partial-order reduction terms).
	for h := range na {
		if p := s.attempts[h].phase; p != holding && p != ended {
			continue
		}
		for i := range c.Nodes {
			switch s.nodes[i].slots[h].acq {
			case replied:
				return append(steps, step{kind: stepReply, h: uint8(h), n: uint8(i)})
			case repliedLate:
				return append(steps, step{kind: stepLateReply, h: uint8(h), n: uint8(i)})
			}
			// Likewise a late extend reply once its extension decided (the
			// only one tidy keeps: a re-create, for a hold that ended).
			if !s.attempts[h].extending && s.nodes[i].slots[h].ext == repliedLate {
				return append(steps, step{kind: stepExtLateReply, h: uint8(h), n: uint8(i)})
			}
		}
	}
	// Clients: start, decide, give up, unlock; validity; replies.
	for cl := range c.Clients {
		for k := range c.Attempts {
			h := cl*c.Attempts + k
			if s.attempts[h].phase == unstarted {
				if k == 0 || s.attempts[h-1].phase == ended {
					steps = append(steps, step{kind: stepStart, h: uint8(h)})
					if k > 0 && s.waits[cl] != 0 && int(s.retries) < c.Retries {
						steps = append(steps, step{kind: stepStart, h: uint8(h), g: 1})
					}
				}
				break
			}
		}
	}
	for h := range na {
		a := &s.attempts[h]
		hh := uint8(h)
		switch a.phase {
		case unstarted:
			continue
		case acquiring:
			if int(s.giveups) < c.GiveUps {
				steps = append(steps, step{kind: stepGiveUp, h: hh})
			}
			granted, refused, _, _ := m.counts(s, h)
			if m.mayReask(s, h, granted, refused) {
				steps = append(steps, step{kind: stepReask, h: hh})
			}
		case raising:
			if int(s.timeouts) < c.Timeouts {
				for i := range c.Nodes {
					if r := s.nodes[i].slots[h].raise; r == raiseAsked || r == raiseReplied {
						steps = append(steps, step{kind: stepRaiseDeadline, h: hh})
						break
					}
				}
			}
		case holding:
			// Unlock waits for an extension deciding (Lock.serial).
			if !a.extending {
				steps = append(steps, step{kind: stepUnlock, h: hh})
			}
			if m.mayExtend(s, h) {
				steps = append(steps, step{kind: stepExtend, h: hh})
			}
			if a.extending && int(s.timeouts) < c.Timeouts {
				steps = append(steps, step{kind: stepExtDeadline, h: hh})
			}
		}
		// A validity runs out: the hold's, then (while an extension decides)
		// that extension's own, which began later.
		if int(s.expiries) < c.Expiries && a.phase != ended && (!a.expired || a.extending && !a.extExpired) {
			steps = append(steps, step{kind: stepValidity, h: hh})
		}
		if (a.phase == acquiring || a.phase == raising) && int(s.timeouts) < c.Timeouts {
			// A deadline after the decision is left out: what it would
			// release, the late reply releases.
			var groups uint8 // ask groups with calls still waiting
			for i := range c.Nodes {
				if sl := &s.nodes[i].slots[h]; sl.acq.waiting() {
					groups |= 1 << sl.group
				}
			}
			for g := range uint8(8) {
				if groups&(1<<g) != 0 {
					steps = append(steps, step{kind: stepDeadline, h: hh, g: g})
				}
			}
		}
		for i := range c.Nodes {
			sl := &s.nodes[i].slots[h]
			switch sl.acq {
			case replied:
				steps = append(steps, step{kind: stepReply, h: hh, n: uint8(i)})
			case repliedLate:
				steps = append(steps, step{kind: stepLateReply, h: hh, n: uint8(i)})
			}
			if sl.raise == raiseReplied {
				steps = append(steps, step{kind: stepRaiseReply, h: hh, n: uint8(i)})
			}
			if sl.ext == replied {
				steps = append(steps, step{kind: stepExtReply, h: hh, n: uint8(i)})
			}
		}
	}
	// Nodes: scripts, crashes, restarts, expiry.
	for i := range c.Nodes {
		nd := &s.nodes[i]
		ii := uint8(i)
		if nd.up {
			for h := range na {
				if m.queuedBehind(s, h, i) {
					continue
				}
				sl := &nd.slots[h]
				hh := uint8(h)
				if sl.acq == asked || sl.acq == askedLate {
					steps = append(steps, step{kind: stepAcquire, h: hh, n: ii})
				}
				if sl.raise == raiseAsked || sl.raise == raiseOrphan {
					steps = append(steps, step{kind: stepRaise, h: hh, n: ii})
				}
				if sl.heal {
					steps = append(steps, step{kind: stepHeal, h: hh, n: ii})
				}
				// The hold's extend call is queued behind its acquire, and
				// the releases sent after it behind the extend call: those
				// of a hold that ended. No release is sent while a hold is
				// on, so one pending then was sent before the extension: it
				// may land at any time (a release that failed is sent again).
				if sl.ext == askedLate || sl.ext == asked && sl.acq != asked {
					steps = append(steps, step{kind: stepExtRun, h: hh, n: ii})
				}
				if sl.release && (sl.ext != asked || s.attempts[h].phase == holding) {
					steps = append(steps, step{kind: stepRelease, h: hh, n: ii})
				}
				if sl.unlock && sl.acq != asked && sl.ext != asked { // queued behind the acquire
					steps = append(steps, step{kind: stepUnlockRelease, h: hh, n: ii})
				}
			}
			if int(s.crashes) < c.Crashes && (!c.Rolling || m.allUp(s)) {
				steps = append(steps, step{kind: stepCrash, n: ii})
			}
		} else {
			// No restart with data: a node down and back with its data is
			// a node whose messages wait meanwhile, which every bound already
			// explores (and with its crash still to come).
			if m.mayForget(s, i) {
				steps = append(steps, step{kind: stepRestartEmpty, n: ii})
			}
		}
		if m.mayExpire(s, i) {
			steps = append(steps, step{kind: stepExpire, n: ii})
		}
		if int(s.leases) < c.Leases {
			for x := range c.Clients {
				if nd.wait[x] != 0 {
					steps = append(steps, step{kind: stepLease, h: uint8(x), n: ii})
				}
			}
		}
	}
	return steps
}

// apply performs st on s.
//
//go:norace
func (m *Model) apply(s *State, st step) {
	h, i := int(st.h), int(st.n)
	switch st.kind {
	case stepStart:
		m.start(s, h, st.g == 1)
	case stepAcquire:
		m.runAcquire(s, h, i)
		if m.cfg.PromptReplies && s.nodes[i].slots[h].acq == replied {
			m.receive(s, h, i)
		}
	case stepReply:
		m.receive(s, h, i)
	case stepLateReply:
		m.receiveLate(s, h, i)
	case stepDeadline:
		m.deadline(s, h, st.g)
		s.timeouts++
	case stepReask:
		m.reask(s, h)
	case stepGiveUp:
		m.fail(s, h)
		s.giveups++
	case stepRaise:
		m.runRaise(s, h, i)
	case stepRaiseReply:
		s.nodes[i].slots[h].raise = raiseGot
		m.evaluateRaise(s, h)
	case stepRaiseDeadline:
		m.raiseDeadline(s, h)
		s.timeouts++
	case stepHeal:
		m.runHeal(s, h, i)
	case stepRelease:
		m.runRelease(s, h, i)
	case stepUnlockRelease:
		m.runUnlockRelease(s, h, i)
	case stepUnlock:
		m.unlock(s, h)
	case stepValidity:
		if a := &s.attempts[h]; a.expired {
			a.extExpired = true
		} else {
			a.expired = true
		}
		s.expiries++
	case stepExpire:
		s.nodes[i].key = 0
	case stepCrash:
		m.crash(s, i)
	case stepRestartEmpty:
		m.restartEmpty(s, i)
	case stepLease:
		m.loseEntry(s, i, h)
		s.leases++
	case stepExtend:
		m.extend(s, h)
	case stepExtRun:
		m.runExtend(s, h, i)
		if m.cfg.PromptReplies && s.nodes[i].slots[h].ext == replied {
			m.receiveExt(s, h, i)
		}
	case stepExtReply:
		m.receiveExt(s, h, i)
	case stepExtLateReply:
		m.receiveExtLate(s, h, i)
	case stepExtDeadline:
		m.extDeadline(s, h)
		s.timeouts++
	}
}
