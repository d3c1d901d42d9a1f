package protomodel

import "math/bits"

// The state of the whole system: nodes, clients' attempts, and every message
// on the wire. A message lives in the slot of the (attempt, node) pair it
// belongs to; messages are delayed without bound and delivered in any order
// (except a client's calls to one node, kept in order: queuedBehind), and a
// lost message is one delayed past the end of the run (for safety the two
// cannot be told apart).

// call is where an attempt's acquire call to one node is.
type call uint8

const (
	idle        call = iota // not asked, or answered and settled
	asked                   // request on the wire; the client waits for it
	replied                 // the node ran the script; reply on the wire
	answered                // the client has the reply
	askedLate               // request on the wire; the client counted a timeout
	repliedLate             // reply on the wire; the client counted a timeout
	timedOut                // the client counted a timeout; nothing on the wire
)

//go:norace
func (c call) waiting() bool { return c == asked || c == replied }

//go:norace
func (c call) failed() bool { return c == askedLate || c == repliedLate || c == timedOut }

//go:norace
func (c call) onWire() bool { return c == asked || c == replied || c == askedLate || c == repliedLate }

// raiseCall is where an attempt's raise call to one node is.
type raiseCall uint8

const (
	noRaise      raiseCall = iota
	raiseAsked             // request on the wire; the client waits
	raiseReplied           // the node ran it; reply on the wire
	raiseGot               // the client has the reply
	raiseOrphan            // request on the wire, nobody waits for the reply
)

// slot is one attempt's business with one node.
type slot struct {
	acq     call
	granted bool  // the acquire reply: granted, else refused
	counter uint8 // the counter the acquire reply reported
	group   uint8 // which ask the acquire call belongs to (0 first, then re-asks)
	raise   raiseCall
	raiseOK bool // the raise reply: it counted
	heal    bool // a heal to the attempt's token is on the wire
	release bool // a compare-and-delete is on the wire: a step back, or a late grant's
	// unlock: the Unlock's compare-and-delete is on the wire; where it
	// deletes, it also ends the client's entry if that is still the hold's.
	unlock bool
	// ext is where the hold's extend call to this node is (the call states
	// of an acquire; a timed-out one is askedLate or repliedLate until it
	// runs and its reply comes); extReply is the node's reply.
	ext      call
	extReply extReply
}

// extReply is what the extend script (or, with the option, the reacquire
// script) answered.
type extReply uint8

const (
	extRefused   extReply = iota // 0: another value holds the key, or (without the option) none does
	extExtended                  // 1: the key held the hold's value: PEXPIRE
	extRecreated                 // 2: the key was absent: SET NX PX, counter raised to the token
)

// keyAge says which validity epoch of its hold the key lives for, relative
// to the hold's current epoch (the acquire, or its last successful
// extension). With exact clocks a key set or refreshed for an epoch lives at
// least until that epoch's validity ran out.
type keyAge uint8

const (
	ageCurrent keyAge = iota // set by the acquire or the current epoch's extension (or one whose outcome was unknown)
	agePending               // refreshed by the extension now deciding
	ageStale                 // refreshed for an earlier epoch: it may expire at any time (permissive)
)

// node is a Redis node: one lock key and the fence counter of its slot.
type node struct {
	up      bool
	skewed  bool  // its clock may run past the drift bound (SkewedNodes)
	key     uint8 // 1 + the attempt whose value the key holds; 0: no key
	age     keyAge
	counter uint8
	// While down: what held when it crashed (see mayForget).
	healed   bool   // the other nodes kept the highest counter on a quorum
	inflight uint16 // the attempts that were acquiring
	// The waiting set: wait[c] is the wait start (a since rank, see
	// waiting.go) of client c's entry, 0 if it has none. An entry whose
	// lease ran out is removed at once: every script purges them before it
	// reads the set. (A client in redlock may have several waiters for a
	// key, but only the first is on the wire: its entry is the client's.)
	wait  [MaxClients]uint8
	slots [maxAttempts]slot
}

type phase uint8

const (
	unstarted phase = iota
	acquiring       // acquire calls out, waiting for a quorum
	raising         // raise calls out to the lagging grants
	holding         // a Lock was returned and not unlocked
	ended           // failed, or unlocked
)

// attempt is one acquisition by one client: start, grants, token, hold.
type attempt struct {
	phase   phase
	won     bool // it returned a Lock
	expired bool // its validity ran out on the client's clock
	// extending: an extension is deciding (one at a time per hold);
	// extExpired: that extension's own validity, which began when it was
	// sent, ran out too (so it can only fail). sentExt: the hold has sent
	// an extension (with the option, its Unlock goes to every node).
	extending, extExpired, sentExt bool
	floor                          uint8 // the highest token returned before it started
	token                          uint8 // t, once computed; carried by its raises and heals
	at                             uint8 // |P|: grants whose counter was t
	reasks                         uint8
	since                          uint8 // the wait start its acquire calls carry (a since rank)
}

// State is one state of the model. It is a value: copying it copies all.
type State struct {
	nodes    [MaxNodes]node
	attempts [maxAttempts]attempt
	crashes  uint8
	timeouts uint8
	giveups  uint8
	expiries uint8
	retries  uint8
	leases   uint8
	extends  uint8
	returned uint64 // bit t: a Lock with token t was returned
	// waits[c]: the wait start of client c's wait (a since rank), 0 when it
	// is not waiting (it holds, or has not begun).
	waits [MaxClients]uint8
	// guard[b][a]: while client b waits, the nodes that held client a's
	// entry of a's wait when b began waiting and have not lost it since, as
	// Config.Fairness counts losses (the fairness check: waiting.go); 0
	// once fewer than a quorum.
	guard [MaxClients][MaxClients]uint8
	bad   badness
}

// badness is a fencing property broken by the step into this state.
type badness uint8

const (
	fine badness = iota
	badOrder
	badDuplicate
	badUnfair
)

// meaningful: the counter in this reply will still be read — it is on
// its way, or waiting for the decision.
//
//go:norace
func (sl *slot) meaningful(a *attempt) bool {
	return sl.acq == replied || sl.acq == answered && (a.phase == acquiring || a.phase == raising)
}

// maxReturned is the highest token returned so far (0: none).
//
//go:norace
func (s *State) maxReturned() uint8 {
	if s.returned == 0 {
		return 0
	}
	return uint8(bits.Len64(s.returned) - 1)
}

// tidy forgets what can no longer influence anything, so that states which
// differ only in it are one state: settled replies of decided attempts,
// ended attempts with nothing left on the wire, and messages whose delivery
// can change nothing any more (a release or an orphaned raise at a node
// where this attempt's key is not and cannot come back; a late refusal; a
// refusal that an abandoned attempt would only read and drop; a heal to a
// counter already at the token that can no longer fall).
//
//go:norace
func (s *State) tidy(m *Model) {
	c := &m.cfg
	n := c.Nodes
	defer m.tidyWaits(s)
	for i := range n {
		// A key's epoch matters only while its hold is on and may still
		// be within a validity: a stale key of a hold whose validity ran
		// out is one that may expire, as a current one.
		nd := &s.nodes[i]
		if nd.key == 0 {
			nd.age = ageCurrent
			continue
		}
		if a := &s.attempts[nd.key-1]; a.phase == ended || a.expired && nd.age == ageStale {
			nd.age = ageCurrent
		}
	}
	for h := range c.Clients * c.Attempts {
		a := &s.attempts[h]
		if a.phase == unstarted {
			continue
		}
		decided := a.phase == holding || a.phase == ended
		if decided {
			a.floor, a.at, a.reasks = 0, 0, 0
		}
		busy := false
		for i := range n {
			nd := &s.nodes[i]
			sl := &nd.slots[h]
			if sl.acq == repliedLate && !sl.granted {
				sl.acq = timedOut // late() reads grants only
			}
			if !sl.meaningful(a) {
				sl.counter = 0
				if sl.acq == timedOut {
					sl.granted = false
				}
			}
			if sl.acq == replied && !sl.granted && a.phase == ended && !a.won {
				sl.acq = idle // settle(abandoned, 0) of a refusal does nothing
			}
			keyMayCome := nd.key == uint8(h+1) || sl.acq == asked || sl.acq == askedLate ||
				m.recreates() && (sl.ext == asked || sl.ext == askedLate)
			if !keyMayCome {
				// Neither release can delete anything now, and an Unlock's
				// touches the waiting set only where it deletes.
				sl.release, sl.unlock = false, false
			}
			if sl.raise == raiseOrphan && !keyMayCome && c.Variant != RaiseWithoutOwnership {
				sl.raise = noRaise
			}
			if sl.heal && nd.counter >= a.token && c.Variant != HealLowers && !mayLoseCounter(c, s, i) {
				sl.heal = false
			}
			if decided {
				if !sl.acq.onWire() {
					sl.counter = 0
					if a.phase == ended {
						sl.acq, sl.granted, sl.group = idle, false, 0
					}
				}
				if sl.raise == raiseGot || sl.raise == raiseReplied {
					sl.raise, sl.raiseOK = noRaise, false
				}
			}
			if !a.extending {
				// Nobody counts an extend reply once its extension decided.
				// Only a late re-create of a hold that ended is still read
				// (it steps back); while the hold is on, the Unlock's
				// release, sent after it ran, removes the key.
				switch {
				case sl.ext == replied || sl.ext == answered,
					sl.ext == repliedLate && (sl.extReply != extRecreated || a.phase != ended):
					sl.ext, sl.extReply = idle, extRefused
				}
			}
			busy = busy || sl.acq.onWire() || sl.raise != noRaise || sl.heal || sl.release || sl.unlock || sl.ext.onWire()
		}
		if a.phase == ended {
			a.expired, a.extExpired, a.sentExt = false, false, false
			if !busy {
				a.token, a.won = 0, false
			}
		}
	}
}
