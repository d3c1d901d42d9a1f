package protomodel

// Property is one of the claims the explorer checks after every step.
type Property string

const (
	// FencingOrder: if acquisition B started after acquisition A returned a
	// Lock, B's token is greater than A's.
	FencingOrder Property = "fencing order"
	// UniqueTokens: no two Locks are returned with the same token.
	UniqueTokens Property = "unique tokens"
	// MutualExclusion: no two Locks are held within their validity at once
	// (with Pause: no two Locks are held at once, validity or not).
	MutualExclusion Property = "mutual exclusion"
	// NoGrantLeftBehind: a key whose attempt failed or was unlocked (a
	// grant, or a key an extension re-created) is on its way out: a release
	// or the reply that releases it when it arrives (the acquire's, a late
	// re-create's) is still on the wire.
	NoGrantLeftBehind Property = "no grant left behind"
	// Fairness: a client does not return a Lock while an older client
	// waits whose entry was on every node of a quorum, without a gap, since
	// before the younger one began waiting (Claim 6; Config.Fairness checks
	// weaker hypotheses instead).
	Fairness Property = "fairness"
)

// check returns the property s breaks, or "".
//
//go:norace
func (m *Model) check(s *State) Property {
	p := m.broken(s)
	for _, u := range m.cfg.Unchecked {
		if p == u {
			return ""
		}
	}
	return p
}

// broken returns the first property s breaks, or "".
//
//go:norace
func (m *Model) broken(s *State) Property {
	switch s.bad {
	case badOrder:
		return FencingOrder
	case badDuplicate:
		return UniqueTokens
	case badUnfair:
		return Fairness
	}
	c := &m.cfg
	if c.checksExclusion() {
		holds := 0
		for h := range c.Clients * c.Attempts {
			a := &s.attempts[h]
			if a.phase == holding && (!a.expired || c.Variant == Pause) {
				holds++
			}
		}
		if holds > 1 {
			return MutualExclusion
		}
	}
	for i := range c.Nodes {
		nd := &s.nodes[i]
		if nd.key == 0 || s.attempts[nd.key-1].phase != ended {
			continue
		}
		sl := &nd.slots[nd.key-1]
		// A late re-create's reply steps back when it arrives (extend.go).
		late := sl.ext == repliedLate && sl.extReply == extRecreated
		if !sl.release && !sl.unlock && sl.acq != replied && sl.acq != repliedLate && !late {
			return NoGrantLeftBehind
		}
	}
	return ""
}
