package protomodel

import (
	"fmt"
	"strings"
)

// Names in traces: nodes n1…, clients c1…, acquisitions c1#1 (client 1's
// first), c1#2, …

//go:norace
func (m *Model) who(h int) string {
	return fmt.Sprintf("c%d#%d", h/m.cfg.Attempts+1, h%m.cfg.Attempts+1)
}

//go:norace
func nodeName(i int) string { return fmt.Sprintf("n%d", i+1) }

// describe says what step st did to s, giving after.
//
//go:norace
func (m *Model) describe(s *State, st step, after *State) string {
	h, i := int(st.h), int(st.n)
	a := m.who(h)
	var d string
	switch st.kind {
	case stepStart:
		how := "starts waiting"
		if st.g == 1 {
			how = "retries"
		}
		d = fmt.Sprintf("%s %s, since %d (tokens so far ≤ %d)", a, how, after.attempts[h].since, after.attempts[h].floor)
	case stepAcquire:
		switch nd := &s.nodes[i]; {
		case after.nodes[i].counter > nd.counter: // only a grant moves it here
			d = fmt.Sprintf("%s grants %s, counter %d", nodeName(i), a, after.nodes[i].counter)
		case nd.key != 0:
			d = fmt.Sprintf("%s refuses %s (held by %s), counter %d", nodeName(i), a, m.who(int(nd.key)-1), after.nodes[i].counter)
		default:
			hd := m.head(nd, h/m.cfg.Attempts)
			d = fmt.Sprintf("%s refuses %s (free, but c%d@%d is first)", nodeName(i), a, hd+1, nd.wait[hd])
		}
	case stepReply:
		d = fmt.Sprintf("%s reads %s's reply", a, nodeName(i))
	case stepLateReply:
		d = fmt.Sprintf("%s reads %s's late reply", a, nodeName(i))
	case stepDeadline:
		var late []string
		for j := range m.cfg.Nodes {
			if sl := &s.nodes[j].slots[h]; sl.group == st.g && sl.acq.waiting() {
				late = append(late, nodeName(j))
			}
		}
		d = fmt.Sprintf("%s: %s time out", a, strings.Join(late, ","))
	case stepReask:
		d = fmt.Sprintf("%s asks the refusing nodes again", a)
	case stepGiveUp:
		d = fmt.Sprintf("%s gives up (ctx ended)", a)
	case stepRaise:
		if after.nodes[i].counter >= s.attempts[h].token && (s.nodes[i].key == uint8(h+1) || m.cfg.Variant == RaiseWithoutOwnership) {
			d = fmt.Sprintf("%s raises to %d for %s", nodeName(i), s.attempts[h].token, a)
		} else {
			d = fmt.Sprintf("%s refuses %s's raise (not its key)", nodeName(i), a)
		}
	case stepRaiseReply:
		d = fmt.Sprintf("%s reads %s's raise reply", a, nodeName(i))
	case stepRaiseDeadline:
		d = fmt.Sprintf("%s: raises time out", a)
	case stepHeal:
		d = fmt.Sprintf("%s heals %d→%d (%s)", nodeName(i), s.nodes[i].counter, after.nodes[i].counter, a)
	case stepRelease:
		if s.nodes[i].key == uint8(h+1) {
			d = fmt.Sprintf("%s releases %s", nodeName(i), a)
		} else {
			d = fmt.Sprintf("%s: %s's release finds no key of it", nodeName(i), a)
		}
	case stepUnlockRelease:
		c := h / m.cfg.Attempts
		switch {
		case s.nodes[i].key != uint8(h+1):
			d = fmt.Sprintf("%s: %s's Unlock finds no key of it", nodeName(i), a)
		case m.cfg.Variant != GrantRemovesEntry && s.nodes[i].wait[c] != 0 && s.nodes[i].wait[c] == s.attempts[h].since:
			d = fmt.Sprintf("%s releases %s (Unlock), c%d's entry goes", nodeName(i), a, c+1)
		default:
			d = fmt.Sprintf("%s releases %s (Unlock)", nodeName(i), a)
		}
	case stepUnlock:
		return fmt.Sprintf("%s unlocks", a)
	case stepValidity:
		d = fmt.Sprintf("%s's validity runs out", a)
	case stepExpire:
		d = fmt.Sprintf("%s's key (%s) expires", nodeName(i), m.who(int(s.nodes[i].key)-1))
	case stepCrash:
		d = fmt.Sprintf("%s crashes", nodeName(i))
	case stepRestartEmpty:
		d = fmt.Sprintf("%s restarts empty", nodeName(i))
	case stepLease:
		d = fmt.Sprintf("%s: c%d's lease ends", nodeName(i), h+1)
		return d
	case stepExtend:
		d = fmt.Sprintf("%s extends", a)
	case stepExtRun:
		// Read off the key: a reply read at once is forgotten (tidy).
		before, own := s.nodes[i].key, uint8(h+1)
		switch {
		case before == own:
			d = fmt.Sprintf("%s extends %s", nodeName(i), a)
		case after.nodes[i].key == own && before != 0:
			d = fmt.Sprintf("%s overwrites %s's key for %s, counter %d", nodeName(i), m.who(int(before)-1), a, after.nodes[i].counter)
		case after.nodes[i].key == own:
			d = fmt.Sprintf("%s re-creates %s's key, counter %d", nodeName(i), a, after.nodes[i].counter)
		case s.nodes[i].key != 0:
			d = fmt.Sprintf("%s refuses %s's extension (held by %s)", nodeName(i), a, m.who(int(s.nodes[i].key)-1))
		default:
			d = fmt.Sprintf("%s refuses %s's extension (no key)", nodeName(i), a)
		}
	case stepExtReply:
		d = fmt.Sprintf("%s reads %s's extend reply", a, nodeName(i))
	case stepExtLateReply:
		d = fmt.Sprintf("%s reads %s's late extend reply", a, nodeName(i))
	case stepExtDeadline:
		return fmt.Sprintf("%s: extend calls time out, outcome unknown", a)
	}
	return d + m.outcome(s, h, after)
}

// outcome names a decision that the step made.
//
//go:norace
func (m *Model) outcome(s *State, h int, after *State) string {
	b, a := &s.attempts[h], &after.attempts[h]
	if b.extending && !a.extending && a.phase == holding {
		return ": EXTENDED" // an unknown outcome comes of a deadline alone: describe
	}
	if b.phase == a.phase {
		return ""
	}
	switch a.phase {
	case raising:
		return fmt.Sprintf(": t=%d on %d, raise", a.token, a.at)
	case holding:
		if b.phase == holding {
			break
		}
		return fmt.Sprintf(": LOCK, token %d", a.token)
	case ended:
		if b.phase == holding {
			return ": extension lost, Unlock follows"
		}
		if b.phase == acquiring || b.phase == raising {
			return ": fails"
		}
	}
	return ""
}

// render shows a state on one line: each node's key holder and counter
// (! down, ~ fast clock), each started acquisition, and the messages on
// the wire.
//
//go:norace
func (m *Model) render(s *State) string {
	var b strings.Builder
	for i := range m.cfg.Nodes {
		nd := &s.nodes[i]
		mark := ""
		if !nd.up {
			mark += "!"
		}
		if nd.skewed {
			mark += "~"
		}
		holder := "-"
		if nd.key != 0 {
			holder = m.who(int(nd.key) - 1)
		}
		var ws []string
		for x := range m.cfg.Clients {
			if w := nd.wait[x]; w != 0 {
				ws = append(ws, fmt.Sprintf("c%d@%d", x+1, w))
			}
		}
		if len(ws) > 0 {
			holder += " w:" + strings.Join(ws, ",")
		}
		fmt.Fprintf(&b, "%s%s[%s %d] ", nodeName(i), mark, holder, nd.counter)
	}
	b.WriteString("|")
	var wire []string
	for h := range m.cfg.Clients * m.cfg.Attempts {
		a := &s.attempts[h]
		if a.phase == unstarted {
			continue
		}
		fmt.Fprintf(&b, " %s@%d:%s", m.who(h), a.since, m.phaseName(a))
		for i := range m.cfg.Nodes {
			sl := &s.nodes[i].slots[h]
			to := m.who(h) + "→" + nodeName(i)
			switch sl.acq {
			case asked, askedLate:
				wire = append(wire, "acquire "+to)
			case replied, repliedLate:
				wire = append(wire, "reply "+to)
			}
			if sl.raise == raiseAsked || sl.raise == raiseOrphan {
				wire = append(wire, "raise "+to)
			}
			if sl.heal {
				wire = append(wire, fmt.Sprintf("heal(%d) %s", a.token, to))
			}
			if sl.release {
				wire = append(wire, "release "+to)
			}
			if sl.unlock {
				wire = append(wire, "unlock "+to)
			}
			switch sl.ext {
			case asked, askedLate:
				wire = append(wire, "extend "+to)
			case replied, repliedLate:
				wire = append(wire, fmt.Sprintf("extend reply %d %s", sl.extReply, to))
			}
		}
	}
	if len(wire) > 0 {
		b.WriteString(" | wire: " + strings.Join(wire, ", "))
	}
	return b.String()
}

//go:norace
func (m *Model) phaseName(a *attempt) string {
	var p string
	switch a.phase {
	case acquiring:
		p = "acquiring"
	case raising:
		p = fmt.Sprintf("raising(t=%d)", a.token)
	case holding:
		p = fmt.Sprintf("HOLDS(t=%d)", a.token)
	case ended:
		p = "done"
	}
	if a.expired {
		p += ",expired"
	}
	if a.extending {
		p += ",extending"
	}
	return p
}
