package protomodel

// The canonical form of a state: what the search stores and compares. Two
// states that differ only by renaming nodes or clients, or by counter
// values shifted alike, have one canonical form.

// rebasable: no node can drop its counter to 0 any more.
//
//go:norace
func (s *State) rebasable(c *Config) bool {
	for i := range c.Nodes {
		if mayLoseCounter(c, s, i) {
			return false
		}
	}
	return true
}

// rebase shifts every counter value down so that the least one still in
// play is 1. Only comparisons between them and +1 matter, and both survive
// a shift, as long as no counter can drop to 0 again (no node may still
// come back empty). Tokens returned below every value in play can never
// be drawn again: they are forgotten, and floors below them become 0.
//
//go:norace
func (s *State) rebase(c *Config) {
	na := c.Clients * c.Attempts
	b := uint8(255)
	for i := range c.Nodes {
		nd := &s.nodes[i]
		b = min(b, nd.counter)
		for h := range na {
			if sl := &nd.slots[h]; sl.meaningful(&s.attempts[h]) {
				b = min(b, sl.counter)
			}
		}
	}
	for h := range na {
		if a := &s.attempts[h]; a.token != 0 {
			b = min(b, a.token)
		}
	}
	if b <= 1 {
		return
	}
	d := b - 1
	for i := range c.Nodes {
		nd := &s.nodes[i]
		nd.counter -= d
		for h := range na {
			if sl := &nd.slots[h]; sl.meaningful(&s.attempts[h]) {
				sl.counter -= d
			}
		}
	}
	for h := range na {
		a := &s.attempts[h]
		if a.token != 0 {
			a.token -= d
		}
		a.floor -= min(a.floor, d)
	}
	s.returned = s.returned >> d &^ 1
}

const (
	slotBytes = 4
	colHead   = 7 // then one byte per client: its entry in the waiting set
	attBytes  = 6
	headBytes = 8 // the run's counts of faults, extensions and bad
	maxEnc    = headBytes + 8 + maxAttempts*attBytes + MaxClients + MaxNodes*(colHead+MaxClients+maxAttempts*slotBytes)
)

// encode writes the state's canonical form, the least of its encodings
// under every renaming of nodes and of clients: nodes are interchangeable
// (their columns are sorted), and so are clients (ordered by their own
// attempts; the orders that leave that sorted are all tried). Counter
// values are rebased first where that is sound.
//
//go:norace
func (s *State) encode(c *Config, buf *[maxEnc]byte) []byte {
	if s.rebasable(c) {
		r := *s
		r.rebase(c)
		s = &r
	}
	if c.Clients == 1 {
		return s.encodeAs(c, &identity, buf)
	}
	var keys [MaxClients][MaxPerClient * attBytes]byte
	for cl := range c.Clients {
		for k := range c.Attempts {
			a := &s.attempts[cl*c.Attempts+k]
			key := keys[cl][k*attBytes:]
			key[0], key[1], key[2], key[3], key[4], key[5] = a.flags(), a.floor, a.token, a.at, a.reasks, a.since
		}
	}
	var alt [maxEnc]byte
	var best []byte
	for _, p := range permutations[c.Clients] {
		sorted := true
		for x := range c.Clients {
			for y := range c.Clients {
				if p[x] < p[y] && less(keys[y][:], keys[x][:]) {
					sorted = false
				}
			}
		}
		if !sorted {
			continue
		}
		if best == nil {
			best = s.encodeAs(c, &p, buf)
		} else if e := s.encodeAs(c, &p, &alt); less(e, best) {
			copy(buf[:], e)
		}
	}
	return best
}

var identity = [MaxClients]uint8{0, 1, 2}

// permutations[n] lists the orders of n clients: p[k] is client k's new
// place.
var permutations = [MaxClients + 1][][MaxClients]uint8{
	1: {identity},
	2: {identity, {1, 0, 2}},
	3: {identity, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}},
}

// encodeAs encodes s with client k renamed p[k], nodes sorted.
//
//go:norace
func (s *State) encodeAs(c *Config, p *[MaxClients]uint8, buf *[maxEnc]byte) []byte {
	na := c.Clients * c.Attempts
	var order [maxAttempts]uint8 // order[new index] = old index
	var rename [maxAttempts + 1]uint8
	for h := range na {
		nh := int(p[h/c.Attempts])*c.Attempts + h%c.Attempts
		order[nh] = uint8(h)
		rename[h+1] = uint8(nh + 1)
	}
	var back [MaxClients]uint8 // back[new place] = old client
	for k := range c.Clients {
		back[p[k]] = uint8(k)
	}
	b := buf[:0]
	// bad is part of the form: a step that breaks a property must not lead
	// to a known state reached by a run that broke nothing (the fairness
	// check leaves no trace in the state after it).
	b = append(b, s.crashes, s.timeouts, s.giveups, s.expiries, s.retries, s.leases, s.extends, byte(s.bad))
	r := s.returned
	for range 8 {
		b = append(b, byte(r))
		r >>= 8
	}
	for _, h := range order[:na] {
		a := &s.attempts[h]
		b = append(b, a.flags(), a.floor, a.token, a.at, a.reasks, a.since)
	}
	for _, k := range back[:c.Clients] {
		b = append(b, s.waits[k])
	}
	start := len(b)
	col := colHead + c.Clients + na*slotBytes
	for i := range c.Nodes {
		nd := &s.nodes[i]
		var inflight uint16
		for h := range na {
			if nd.inflight&(1<<h) != 0 {
				inflight |= 1 << (rename[h+1] - 1)
			}
		}
		var guard uint16 // bit b·Clients+a: node i is in guard[b][a]
		for y := range c.Clients {
			for x := range c.Clients {
				if s.guard[y][x]&(1<<i) != 0 {
					guard |= 1 << (int(p[y])*c.Clients + int(p[x]))
				}
			}
		}
		b = append(b, bit(nd.up, 0)|bit(nd.skewed, 1)|bit(nd.healed, 2)|byte(nd.age)<<3, rename[nd.key], nd.counter,
			byte(inflight), byte(inflight>>8), byte(guard), byte(guard>>8))
		for _, k := range back[:c.Clients] {
			b = append(b, nd.wait[k])
		}
		for _, h := range order[:na] {
			sl := &nd.slots[h]
			b = append(b,
				byte(sl.acq)|bit(sl.granted, 3)|sl.group<<4|bit(sl.heal, 6)|bit(sl.release, 7),
				sl.counter,
				byte(sl.raise)|bit(sl.raiseOK, 3)|bit(sl.unlock, 4),
				byte(sl.ext)|byte(sl.extReply)<<3)
		}
	}
	sortColumns(b[start:], col, c.Nodes)
	return b
}

//go:norace
func bit(v bool, shift uint) byte {
	if v {
		return 1 << shift
	}
	return 0
}

// sortColumns sorts n columns of w bytes each in place (insertion sort: n ≤ 5).
//
//go:norace
func sortColumns(b []byte, w, n int) {
	for i := 1; i < n; i++ {
		for j := i; j > 0 && less(b[j*w:(j+1)*w], b[(j-1)*w:j*w]); j-- {
			x, y := b[j*w:(j+1)*w], b[(j-1)*w:j*w]
			for k := range w {
				x[k], y[k] = y[k], x[k]
			}
		}
	}
}

//go:norace
func less(x, y []byte) bool {
	for i := range x {
		if x[i] != y[i] {
			return x[i] < y[i]
		}
	}
	return false
}

// fingerprint is a 64-bit hash of the canonical form (FNV-1a, then a final
// mix). Two distinct states share one with probability about 2^-64 per
// pair: at ten million states, the chance that any state is hidden by a
// collision is below 3e-6.
//
//go:norace
func fingerprint(b []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, x := range b {
		h ^= uint64(x)
		h *= 1099511628211
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	return h | 1 // 0 marks "no parent"
}

// decode reads a canonical form back (node order is the sorted one).
//
//go:norace
func (s *State) decode(c *Config, b []byte) {
	na := c.Clients * c.Attempts
	*s = State{}
	s.crashes, s.timeouts, s.giveups, s.expiries, s.retries, s.leases, s.extends = b[0], b[1], b[2], b[3], b[4], b[5], b[6]
	s.bad = badness(b[7])
	for k := range 8 {
		s.returned |= uint64(b[headBytes+k]) << (8 * k)
	}
	b = b[headBytes+8:]
	for h := range na {
		a := &s.attempts[h]
		a.phase, a.won, a.expired = phase(b[0]&7), b[0]&(1<<3) != 0, b[0]&(1<<4) != 0
		a.extending, a.extExpired, a.sentExt = b[0]&(1<<5) != 0, b[0]&(1<<6) != 0, b[0]&(1<<7) != 0
		a.floor, a.token, a.at, a.reasks, a.since = b[1], b[2], b[3], b[4], b[5]
		b = b[attBytes:]
	}
	copy(s.waits[:c.Clients], b)
	b = b[c.Clients:]
	for i := range c.Nodes {
		nd := &s.nodes[i]
		nd.up, nd.skewed, nd.healed, nd.age, nd.key, nd.counter = b[0]&1 != 0, b[0]&2 != 0, b[0]&4 != 0, keyAge(b[0]>>3&3), b[1], b[2]
		nd.inflight = uint16(b[3]) | uint16(b[4])<<8
		guard := uint16(b[5]) | uint16(b[6])<<8
		for y := range c.Clients {
			for x := range c.Clients {
				if guard&(1<<(y*c.Clients+x)) != 0 {
					s.guard[y][x] |= 1 << i
				}
			}
		}
		copy(nd.wait[:c.Clients], b[colHead:])
		b = b[colHead+c.Clients:]
		for h := range na {
			sl := &nd.slots[h]
			sl.acq, sl.granted, sl.group = call(b[0]&7), b[0]&(1<<3) != 0, b[0]>>4&3
			sl.heal, sl.release = b[0]&(1<<6) != 0, b[0]&(1<<7) != 0
			sl.counter = b[1]
			sl.raise, sl.raiseOK, sl.unlock = raiseCall(b[2]&7), b[2]&(1<<3) != 0, b[2]&(1<<4) != 0
			sl.ext, sl.extReply = call(b[3]&7), extReply(b[3]>>3&3)
			b = b[slotBytes:]
		}
	}
}

// flags packs an attempt's phase and flags into one byte of its form.
//
//go:norace
func (a *attempt) flags() byte {
	return byte(a.phase) | bit(a.won, 3) | bit(a.expired, 4) | bit(a.extending, 5) | bit(a.extExpired, 6) | bit(a.sentExt, 7)
}
