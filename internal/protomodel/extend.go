package protomodel

// Extend, transcribed from package redlock (Lock.Extend, scripts/extend.lua
// and, with WithReacquireOnExtend, the reacquire script). A hold within its
// validity sends extend(v, ttl) to every node; a node's call stays in order
// with the hold's other calls to it (behind the acquire, ahead of the
// Unlock's release). The client counts the yes answers (1 extended, 2
// re-created): at a quorum the extension succeeds and begins a new validity
// epoch; at more than N − q refusals the hold is lost and its Unlock
// follows; when calls time out short of either, the outcome is unknown and
// the hold keeps its old validity (the nodes that ran it have a key that
// lives at least as long).
//
// Epochs: a key lives at least until the validity of the epoch that last
// set or refreshed it ran out (it was set for ttl at or after that epoch
// began). node.age says which epoch that is, relative to the hold's: an
// extension's own epoch begins when it is sent, so its validity ends after
// the current one's (the model has one ttl), and it may run out while the
// extension decides — a second validity event of the hold.

// mayExtend: hold h may send an extension now: it is within its validity,
// none of its extensions is deciding or has calls on the wire, and the
// run's budget is not spent.
//
//go:norace
func (m *Model) mayExtend(s *State, h int) bool {
	a := &s.attempts[h]
	if a.phase != holding || a.expired || a.extending || int(s.extends) >= m.cfg.Extends {
		return false
	}
	for i := range m.cfg.Nodes {
		if s.nodes[i].slots[h].ext.onWire() {
			return false
		}
	}
	return true
}

// extend is Lock.Extend: extend(v, ttl) to every node.
//
//go:norace
func (m *Model) extend(s *State, h int) {
	a := &s.attempts[h]
	a.extending, a.extExpired, a.sentExt = true, false, true
	s.extends++
	for i := range m.cfg.Nodes {
		sl := &s.nodes[i].slots[h]
		sl.ext, sl.extReply = asked, extRefused
	}
}

// runExtend is extend.lua: PEXPIRE only while the key holds the hold's
// value (a vanished key is never re-created) and reply 1, else 0. With the
// option, the reacquire script: where the key is absent, SET key v NX PX
// ttl and counter := max(counter, token), reply 2; where another value
// holds it, 0. The waiting set is not touched.
//
//go:norace
func (m *Model) runExtend(s *State, h, i int) {
	nd := &s.nodes[i]
	sl := &nd.slots[h]
	a := &s.attempts[h]
	age := ageCurrent // a late call of a decided extension: see extUnknown
	if a.extending {
		age = agePending
	}
	switch {
	case nd.key == uint8(h+1):
		nd.age, sl.extReply = age, extExtended
	case m.recreates() && (nd.key == 0 || m.cfg.Variant == ReacquireOverwrites):
		nd.key, nd.age, sl.extReply = uint8(h+1), age, extRecreated
		nd.counter = max(nd.counter, a.token)
	default:
		sl.extReply = extRefused
	}
	if sl.ext == asked {
		sl.ext = replied
	} else {
		sl.ext = repliedLate
	}
}

// receiveExt: node i's extend reply reaches the client; while the
// extension decides, it counts.
//
//go:norace
func (m *Model) receiveExt(s *State, h, i int) {
	s.nodes[i].slots[h].ext = answered
	if s.attempts[h].extending {
		m.evaluateExt(s, h)
	}
}

// receiveExtLate: a reply that comes after its call timed out. A re-create
// for a hold that has ended steps back, as a late grant does: the Unlock's
// release, which did not wait for the timed-out call, may have run before
// it. (Any other late reply was forgotten: state.go, tidy.)
//
//go:norace
func (m *Model) receiveExtLate(s *State, h, i int) {
	sl := &s.nodes[i].slots[h]
	if sl.extReply == extRecreated && s.attempts[h].phase == ended {
		sl.release = true
	}
	sl.ext, sl.extReply = idle, extRefused
}

// evaluateExt is Extend's count: success at q yes, lost at more than N − q
// refusals, unknown when nothing is left to wait for.
//
//go:norace
func (m *Model) evaluateExt(s *State, h int) {
	yes, no, waiting := 0, 0, 0
	for i := range m.cfg.Nodes {
		sl := &s.nodes[i].slots[h]
		switch {
		case sl.ext.waiting():
			waiting++
		case sl.ext != answered:
		case sl.extReply != extRefused || m.cfg.Variant == ReacquireCountsRefusal:
			yes++
		default:
			no++
		}
	}
	q := m.cfg.quorum()
	switch {
	case yes >= q && !s.attempts[h].extExpired:
		m.extended(s, h)
	case yes >= q || no > m.cfg.Nodes-q:
		m.extLost(s, h) // no validity would be left, or a quorum says it is gone
	case waiting == 0:
		m.extUnknown(s, h)
	}
}

// extended: the extension succeeded. The hold's validity is the new
// epoch's, which began when it was sent: the keys it refreshed or re-created
// are the current ones, the others are stale.
//
//go:norace
func (m *Model) extended(s *State, h int) {
	a := &s.attempts[h]
	a.extending, a.extExpired, a.expired = false, false, false
	for i := range m.cfg.Nodes {
		if nd := &s.nodes[i]; nd.key == uint8(h+1) {
			switch nd.age {
			case ageCurrent:
				nd.age = ageStale
			case agePending:
				nd.age = ageCurrent
			}
		}
	}
}

// extUnknown: neither a quorum of yes nor of refusals (calls timed out).
// The hold keeps its old validity; a key the extension refreshed lives at
// least as long as the current epoch's (it was refreshed later, for ttl).
//
//go:norace
func (m *Model) extUnknown(s *State, h int) {
	a := &s.attempts[h]
	a.extending, a.extExpired = false, false
	for i := range m.cfg.Nodes {
		if nd := &s.nodes[i]; nd.key == uint8(h+1) && nd.age == agePending {
			nd.age = ageCurrent
		}
	}
}

// extLost: ErrLockLost. The hold ends, and its Unlock follows (as in Do).
//
//go:norace
func (m *Model) extLost(s *State, h int) {
	m.extUnknown(s, h)
	m.unlock(s, h)
}

// extDeadline: the extend calls that have not answered time out; they may
// still run at any later time, out of order with the hold's later calls.
//
//go:norace
func (m *Model) extDeadline(s *State, h int) {
	for i := range m.cfg.Nodes {
		sl := &s.nodes[i].slots[h]
		switch sl.ext {
		case asked:
			sl.ext = askedLate
		case replied:
			sl.ext = repliedLate
		}
	}
	m.evaluateExt(s, h)
}
