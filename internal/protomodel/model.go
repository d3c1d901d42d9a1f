package protomodel

// Model is the protocol under one Config.
type Model struct {
	cfg Config
}

// New checks c and returns its model.
//
//go:norace
func New(c Config) (*Model, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	return &Model{cfg: c}, nil
}

// initial is the state before anything happened.
//
//go:norace
func (m *Model) initial() State {
	var s State
	for i := range m.cfg.Nodes {
		s.nodes[i].up = true
		s.nodes[i].skewed = m.cfg.Variant == SkewedNodes && i < m.cfg.Skewed
		if m.cfg.Init != nil {
			s.nodes[i].counter = uint8(m.cfg.Init[i])
		}
	}
	return s
}

// queuedBehind: a client's calls for one key to one node go through one
// worker queue, one batch at a time, so attempt h's calls reach node i only
// after every call of the client's earlier attempts that is still on that
// queue has run and answered. A call that timed out has left the queue
// (askedLate, repliedLate): it may still run at any time.
//
//go:norace
func (m *Model) queuedBehind(s *State, h, i int) bool {
	k := h % m.cfg.Attempts
	for e := h - k; e < h; e++ {
		sl := &s.nodes[i].slots[e]
		if sl.acq == asked || sl.acq == replied || sl.raise != noRaise && sl.raise != raiseGot || sl.heal || sl.release || sl.unlock ||
			sl.ext == asked || sl.ext == replied {
			return true
		}
	}
	return false
}

// recreates: an extension may put the key back where it is absent (the
// option WithReacquireOnExtend).
//
//go:norace
func (m *Model) recreates() bool { return m.cfg.Reacquire }
