package protomodel

// The client side, transcribed from package redlock: tryOnce and its tally
// (collect answers, decide at a quorum or when stuck), fence (fast path or
// raise under ownership), settle (heal after a success, release after a
// failure or an unlock), late (a reply after the call timed out) and Unlock.

// counts tallies attempt h's acquire calls as the client sees them.
//
//go:norace
func (m *Model) counts(s *State, h int) (granted, refused, failed, waiting int) {
	for i := range m.cfg.Nodes {
		sl := &s.nodes[i].slots[h]
		switch {
		case sl.acq.waiting():
			waiting++
		case sl.acq.failed():
			failed++
		case sl.acq == answered && sl.granted:
			granted++
		case sl.acq == answered:
			refused++
		}
	}
	return
}

// evaluate is tryOnce's loop body after an answer: decide if the answers
// allow it. A stuck attempt that might win a split vote stays to re-ask
// (an event of its own); one that cannot fails at once.
//
//go:norace
func (m *Model) evaluate(s *State, h int) {
	granted, refused, _, waiting := m.counts(s, h)
	q := m.cfg.quorum()
	if granted >= q {
		m.fence(s, h)
		return
	}
	stuck := waiting == 0 || granted+waiting < q
	if stuck && !m.mayReask(s, h, granted, refused) {
		m.fail(s, h)
	}
}

// mayReask: the attempt may be the winner of a split vote (tally.wins
// compares values, which the model leaves open: either side may win).
//
//go:norace
func (m *Model) mayReask(s *State, h, granted, refused int) bool {
	a := &s.attempts[h]
	return a.phase == acquiring && !a.expired && int(a.reasks) < m.cfg.Reasks &&
		granted > 0 && refused > 0 && granted+refused >= m.cfg.quorum()
}

// fence computes the token from the grants: t is their highest counter, P
// the grants at t. Fast path |P| ≥ q; else raise the others, under
// ownership, and count.
//
//go:norace
func (m *Model) fence(s *State, h int) {
	a := &s.attempts[h]
	var t, at uint8
	for i := range m.cfg.Nodes {
		if sl := &s.nodes[i].slots[h]; sl.acq == answered && sl.granted {
			t = max(t, sl.counter)
		}
	}
	for i := range m.cfg.Nodes {
		if sl := &s.nodes[i].slots[h]; sl.acq == answered && sl.granted && sl.counter == t {
			at++
		}
	}
	a.token, a.at = t, at
	if int(at) >= m.cfg.quorum() || m.cfg.Variant == NoRaise {
		m.succeed(s, h)
		return
	}
	a.phase = raising
	for i := range m.cfg.Nodes {
		if sl := &s.nodes[i].slots[h]; sl.acq == answered && sl.granted && sl.counter < t {
			sl.raise = raiseAsked
		}
	}
}

// evaluateRaise is fence's fanout: success at q, failure when q is out of
// reach.
//
//go:norace
func (m *Model) evaluateRaise(s *State, h int) {
	a := &s.attempts[h]
	ok, waiting := int(a.at), 0
	for i := range m.cfg.Nodes {
		sl := &s.nodes[i].slots[h]
		switch {
		case sl.raise == raiseGot && sl.raiseOK:
			ok++
		case sl.raise == raiseAsked || sl.raise == raiseReplied:
			waiting++
		}
	}
	q := m.cfg.quorum()
	switch {
	case ok >= q:
		m.succeed(s, h)
	case ok+waiting < q:
		m.fail(s, h)
	}
}

// succeed is the end of tryOnce: the validity check, then the Lock, then
// settle: every node that answered with a counter below t is healed.
//
//go:norace
func (m *Model) succeed(s *State, h int) {
	a := &s.attempts[h]
	if a.expired {
		m.fail(s, h) // errNoValidity
		return
	}
	t := a.token
	switch {
	case t <= a.floor:
		s.bad = badOrder
	case s.returned&(1<<t) != 0:
		s.bad = badDuplicate
	}
	s.returned |= 1 << t
	a.phase, a.won = holding, true
	m.won(s, h)
	m.forgetRaises(s, h)
	for i := range m.cfg.Nodes {
		if sl := &s.nodes[i].slots[h]; sl.acq == answered && sl.counter < t {
			sl.heal = true
		}
	}
}

// fail abandons the attempt: release every grant in, and every node that
// failed (an error may hide a grant). Calls still open settle on arrival.
//
//go:norace
func (m *Model) fail(s *State, h int) {
	a := &s.attempts[h]
	a.phase, a.won = ended, false
	m.forgetRaises(s, h)
	for i := range m.cfg.Nodes {
		sl := &s.nodes[i].slots[h]
		if (sl.acq == answered && sl.granted) || sl.acq.failed() {
			sl.release = true
		}
	}
}

// unlock is Lock.Unlock: compare-and-delete, with the client's entry
// (release.lua's hold since and id), on every node but those whose answer
// in is a refusal: those that granted or failed, and those still to
// answer the first ask (the release reaches such a node after the
// acquire: one queue per key and node). A grant that answers a re-ask of a
// refusing node after this steps back (receive); so does one that answers
// after its call timed out (receiveLate). Answers still to come heal.
// With the option, once the hold has sent an extension, every node: one
// that refused the acquire may hold a re-created key (the release reaches
// it after the extension: one queue).
//
//go:norace
func (m *Model) unlock(s *State, h int) {
	a := &s.attempts[h]
	everyNode := a.sentExt && m.recreates() && m.cfg.Variant != ReacquireUnreleased
	a.phase = ended
	for i := range m.cfg.Nodes {
		sl := &s.nodes[i].slots[h]
		if everyNode || (sl.acq == answered && sl.granted) || sl.acq.failed() || sl.acq.waiting() && sl.group == 0 {
			sl.unlock = true
		}
	}
}

// forgetRaises: once decided, nobody reads raise replies; requests still on
// the wire will run all the same.
//
//go:norace
func (m *Model) forgetRaises(s *State, h int) {
	for i := range m.cfg.Nodes {
		sl := &s.nodes[i].slots[h]
		switch sl.raise {
		case raiseAsked:
			sl.raise = raiseOrphan
		case raiseReplied, raiseGot:
			sl.raise, sl.raiseOK = noRaise, false
		}
	}
}

// receive is attempt.answer: record node i's reply, then decide (while
// undecided) or settle it (once decided).
//
//go:norace
func (m *Model) receive(s *State, h, i int) {
	a := &s.attempts[h]
	sl := &s.nodes[i].slots[h]
	sl.acq = answered
	switch a.phase {
	case acquiring:
		m.evaluate(s, h)
	case holding:
		if sl.counter < a.token {
			sl.heal = true
		}
	case ended:
		// A failed attempt's grant steps back, and so does an unlocked
		// one's that answers a re-ask (Unlock left its node out); the
		// Unlock's release, queued behind it, removes any other.
		if sl.granted && (!a.won || sl.group > 0) && m.cfg.Variant != LateGrantKept {
			sl.release = true
		}
		if a.won && sl.counter < a.token { // unlocked: heal all the same
			sl.heal = true
		}
	}
	// raising: fence's fanout does not read acquire replies; settled at the
	// decision (succeed/fail look at every answered call).
}

// receiveLate is attempt.late: a grant that comes after its call timed out
// steps back once its attempt has ended. While the attempt decides it is
// left to the decision, as the failed call it is: fail releases every
// failed node, and a hold's Unlock sends its release to every node that
// failed (or the TTL ends it).
//
//go:norace
func (m *Model) receiveLate(s *State, h, i int) {
	sl := &s.nodes[i].slots[h]
	sl.acq = timedOut
	p := s.attempts[h].phase
	if m.cfg.Variant != LateGrantSteppedBack && p != ended {
		return // fail releases it (a failed call), or the hold's Unlock does
	}
	if sl.granted && p != holding {
		sl.release = true
	}
}

// deadline: the calls of ask group g that have not answered time out. A
// timeout is an error answer; it settles like one.
//
//go:norace
func (m *Model) deadline(s *State, h int, g uint8) {
	a := &s.attempts[h]
	for i := range m.cfg.Nodes {
		sl := &s.nodes[i].slots[h]
		if sl.group != g || !sl.acq.waiting() {
			continue
		}
		if sl.acq == asked {
			sl.acq = askedLate
		} else {
			sl.acq = repliedLate
		}
		if a.phase == ended {
			sl.release = true
		}
	}
	if a.phase == acquiring {
		m.evaluate(s, h)
	}
}

// raiseDeadline: the raise calls that have not answered time out.
//
//go:norace
func (m *Model) raiseDeadline(s *State, h int) {
	for i := range m.cfg.Nodes {
		sl := &s.nodes[i].slots[h]
		switch sl.raise {
		case raiseAsked:
			sl.raise = raiseOrphan
		case raiseReplied:
			sl.raise, sl.raiseOK = noRaise, false
		}
	}
	m.evaluateRaise(s, h)
}

// reask: a split vote's winner asks the nodes that refused again.
//
//go:norace
func (m *Model) reask(s *State, h int) {
	a := &s.attempts[h]
	a.reasks++
	for i := range m.cfg.Nodes {
		if sl := &s.nodes[i].slots[h]; sl.acq == answered && !sl.granted {
			sl.acq, sl.group, sl.counter = asked, a.reasks, 0
		}
	}
}

// start begins client c's next attempt: value fresh, validity from now,
// the acquire script sent to every node, with the wait start of the wait it
// continues (retry) or begins.
//
//go:norace
func (m *Model) start(s *State, h int, retry bool) {
	a := &s.attempts[h]
	a.phase, a.floor = acquiring, s.maxReturned()
	m.beginWait(s, h, retry)
	for i := range m.cfg.Nodes {
		s.nodes[i].slots[h].acq = asked
	}
}
