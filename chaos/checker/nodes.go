package checker

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/history"
)

// The node guarantees: what the lock promises about the state it leaves on
// its nodes, judged from probes (KindProbe), reads of one node each that the
// harness makes beside the lock. A probe that failed proves nothing; a
// history without probes is not judged. Times a node gives (PTTL) are read
// on the history clock, allowing the probe's whole round trip:
//
//   - LeftoverGrant: a probe invoked at least the release allowance after
//     its client's latest failed acquire or release of the key returned
//     found there the value of one of that client's released holds, or a
//     value the probe marks Own (one the client's lock made for a call that
//     ended before it) that is none of the client's holds. The lock releases late grants and the rest of an
//     Unlock in the background, within a few node timeouts of a node that
//     answers (CheckOptions.ReleaseAllowance).
//   - UntilBeyondQuorum: after a successful acquire or extend, the first
//     probe of each node (before the hold's next extend or release) shows
//     how long the node still holds the hold's value: until the probe
//     returned plus its PTTL (plus a millisecond: PTTL is whole ones), the
//     probe's return when it found another value or none, and for ever when
//     it failed or there was none. The validity end recorded must not be
//     later than the quorum-th largest of these.
//   - UnlockResult: after an Unlock that said released, the first probe of
//     each node after it returned found the hold's value on fewer than a
//     quorum of nodes; after one that said lost, the latest probe of each
//     node before it (and after any extend) did not find the value, with a
//     PTTL (less a millisecond: the node's remaining time may be that much
//     shorter) reaching past the Unlock's return, on a quorum: those nodes
//     held it all through the Unlock.
//
// A hold recorded without its value is not judged: no probe matches it.
//
// Each violation names the nodes it is about (Violation.Nodes): only faults
// on them, and on its client, are blamed.

// nodeExpected returns the faults that excuse a node guarantee, when they
// hit a node the violation is about (or its client):
//   - LeftoverGrant: every node fault, since each may hold a release back
//     until it ends (a node down, frozen, cut off, slow, or whose replies
//     are lost is retried until it answers or the key has expired), and a
//     client's slow clock, which slows its retries;
//   - UntilBeyondQuorum: a node that lost its data (the key is gone) or
//     whose clock jumped (the key expired early), and a client whose clock
//     is skewed (it measures its validity on a clock that runs slow); the
//     drift within the lock's allowance is not excused, since Until allows
//     for it;
//   - UnlockResult: the same, and the allowed drift too, as a PTTL read
//     on a fast clock overstates how long the key stays.
func nodeExpected(p Property) []fault.Kind {
	var kinds []fault.Kind
	for _, k := range fault.Kinds() {
		switch {
		case p == LeftoverGrant && (!k.ClientSide() || k == fault.ClientClockSkew):
		case p != LeftoverGrant && (k.LosesData() || k == fault.ClockSkew):
		case p == UntilBeyondQuorum && k == fault.ClientClockSkew:
		case p == UnlockResult && k == fault.ClockDrift:
		default:
			continue
		}
		kinds = append(kinds, k)
	}
	return kinds
}

// forever is a node expiry that is not known to end.
const forever = time.Duration(math.MaxInt64)

// holdLife is one hold's ops in order: its acquire, its extends and
// releases, and the probes that name it.
type holdLife struct {
	acquire history.Op
	ops     []history.Op // extends and releases, by invocation
	probes  []history.Op
}

func nodeGuarantees(h history.History, allowance time.Duration) []Violation {
	lives := map[int]*holdLife{}
	var order []int
	for _, op := range h.Ops {
		switch {
		case op.Kind == history.KindAcquire && op.Outcome == history.OK:
			lives[op.ID] = &holdLife{acquire: op}
			order = append(order, op.ID)
		case op.Hold == 0 || lives[op.Hold] == nil:
		case op.Kind == history.KindProbe:
			lives[op.Hold].probes = append(lives[op.Hold].probes, op)
		case op.Kind == history.KindExtend || op.Kind == history.KindRelease:
			lives[op.Hold].ops = append(lives[op.Hold].ops, op)
		}
	}
	var vs []Violation
	if h.Nodes > 0 {
		q := h.Nodes/2 + 1
		for _, id := range order {
			if lives[id].acquire.Value == "" {
				continue // no value recorded: no probe can be matched to the hold
			}
			vs = append(vs, untilBeyondQuorum(lives[id], h.Nodes, q)...)
			vs = append(vs, unlockResult(lives[id], q)...)
		}
	}
	if allowance > 0 {
		vs = append(vs, leftoverGrants(h, allowance)...)
	}
	return vs
}

// firstPerNode returns, per node, the first probe that succeeded among
// probes invoked in [from, to); failed ones are skipped (they prove
// nothing).
func firstPerNode(probes []history.Op, from, to time.Duration) map[int]history.Op {
	first := map[int]history.Op{}
	for _, p := range probes {
		if p.Outcome != history.OK || p.Invoke < from || p.Invoke >= to {
			continue
		}
		if _, ok := first[p.Node]; !ok {
			first[p.Node] = p
		}
	}
	return first
}

func untilBeyondQuorum(l *holdLife, nodes, q int) []Violation {
	var vs []Violation
	steps := append([]history.Op{l.acquire}, l.ops...)
	for i, e := range steps {
		if (e.Kind != history.KindAcquire && e.Kind != history.KindExtend) || e.Outcome != history.OK || e.ValidUntil == 0 {
			continue
		}
		next := forever
		if i+1 < len(steps) {
			next = steps[i+1].Invoke
		}
		probes := firstPerNode(l.probes, e.Complete, next)
		if len(probes) == 0 {
			continue
		}
		exp := make([]time.Duration, nodes)
		var short []int
		ids := []int{e.ID}
		for n := range nodes {
			p, ok := probes[n]
			switch {
			case !ok:
				exp[n] = forever
				continue
			case p.Value != l.acquire.Value:
				exp[n] = p.Complete
			case p.PTTL == 0:
				exp[n] = forever // no expiry given: not known to end
			default:
				exp[n] = p.Complete + p.PTTL + time.Millisecond
			}
			if exp[n] < e.ValidUntil {
				short = append(short, n)
				ids = append(ids, p.ID)
			}
		}
		sorted := slices.Clone(exp)
		slices.SortFunc(sorted, func(a, b time.Duration) int { return -cmpDur(a, b) })
		held := sorted[q-1]
		if e.ValidUntil <= held {
			continue
		}
		vs = append(vs, Violation{Property: UntilBeyondQuorum, Key: l.acquire.Key, Ops: ids,
			Clients: []int{l.acquire.Client}, Nodes: short, Start: held, End: e.ValidUntil, Since: e.Invoke,
			Detail: fmt.Sprintf("%s %d of hold %d (client %d, token %d) gave a validity end %v, but a quorum of nodes held the value only until %v (nodes %v fell short)",
				e.Kind, e.ID, l.acquire.ID, l.acquire.Client, l.acquire.Token, e.ValidUntil, held, short)})
	}
	return vs
}

func unlockResult(l *holdLife, q int) []Violation {
	var vs []Violation
	for i, r := range l.ops {
		if r.Kind != history.KindRelease {
			continue
		}
		var holding []int
		ids := []int{r.ID}
		switch r.Outcome {
		case history.OK:
			for n, p := range firstPerNode(l.probes, r.Complete, forever) {
				if p.Value == l.acquire.Value {
					holding = append(holding, n)
					ids = append(ids, p.ID)
				}
			}
		case history.LockLost:
			// The latest probe of each node after the last extend before
			// the Unlock, returned before it.
			from := l.acquire.Complete
			for _, e := range l.ops[:i] {
				if e.Kind == history.KindExtend {
					from = max(from, e.Invoke)
				}
			}
			last := map[int]history.Op{}
			for _, p := range l.probes {
				if p.Outcome == history.OK && p.Invoke >= from && p.Complete <= r.Invoke {
					last[p.Node] = p
				}
			}
			for n, p := range last {
				// PTTL is whole milliseconds, rounded down from a time that
				// may be up to a millisecond shorter.
				if p.Value == l.acquire.Value && p.PTTL > 0 && p.Invoke+p.PTTL-time.Millisecond > r.Complete {
					holding = append(holding, n)
					ids = append(ids, p.ID)
				}
			}
		default:
			continue
		}
		if len(holding) < q {
			continue
		}
		slices.Sort(holding)
		slices.Sort(ids[1:])
		said := "released"
		if r.Outcome == history.LockLost {
			said = "lost"
		}
		vs = append(vs, Violation{Property: UnlockResult, Key: l.acquire.Key, Ops: ids,
			Clients: []int{l.acquire.Client}, Nodes: holding, Start: r.Invoke, End: r.Complete, Since: r.Invoke,
			Detail: fmt.Sprintf("release %d of hold %d (client %d, token %d) said %s, but nodes %v (a quorum is %d) held the value %s it",
				r.ID, l.acquire.ID, l.acquire.Client, l.acquire.Token, said, holding, q, map[bool]string{true: "after", false: "throughout"}[r.Outcome == history.OK])})
	}
	return vs
}

// leftoverGrants judges the probes that found a value against their
// client's latest failed acquire or release of the key (see above).
func leftoverGrants(h history.History, allowance time.Duration) []Violation {
	type ck struct {
		client int
		key    string
	}
	type found struct {
		ck
		value string
		node  int
	}
	settled := map[ck]history.Op{}       // the client's latest failed acquire or release of the key, so far
	released := map[ck]map[string]bool{} // values of the client's holds whose release returned
	var (
		probes []history.Op
		vs     []Violation
	)
	holds := map[ck]map[string]bool{} // the values of each client's holds of each key
	for _, op := range h.Ops {
		switch {
		case op.Kind == history.KindProbe:
			probes = append(probes, op)
		case op.Kind == history.KindAcquire && op.Outcome == history.OK && op.Value != "":
			k := ck{op.Client, op.Key}
			if holds[k] == nil {
				holds[k] = map[string]bool{}
			}
			holds[k][op.Value] = true
		}
	}
	// Settles are taken in order of return, probes of invocation: walk
	// both by time.
	var settles []history.Op
	for _, op := range h.Ops {
		if (op.Kind == history.KindRelease && op.Outcome != history.Pending) || (op.Kind == history.KindAcquire && op.Outcome == history.Failed) {
			settles = append(settles, op)
		}
	}
	slices.SortStableFunc(settles, func(a, b history.Op) int { return cmpDur(a.Complete, b.Complete) })
	seen := map[found]bool{}
	next := 0
	for _, p := range probes {
		for next < len(settles) && settles[next].Complete <= p.Invoke {
			s := settles[next]
			k := ck{s.Client, s.Key}
			settled[k] = s
			if s.Kind == history.KindRelease {
				if released[k] == nil {
					released[k] = map[string]bool{}
				}
				released[k][s.Value] = true
			}
			next++
		}
		k := ck{p.Client, p.Key}
		s, ok := settled[k]
		if p.Outcome != history.OK || p.Value == "" || !ok || p.Invoke < s.Complete+allowance {
			continue
		}
		// A value the probe marks own that is one of the client's holds
		// is no failed call's grant (another thread of the client holds
		// it, or held it): only the release rule judges it.
		if own := p.Own && !holds[k][p.Value]; !own && !released[k][p.Value] {
			continue
		}
		f := found{k, p.Value, p.Node}
		if seen[f] {
			continue
		}
		seen[f] = true
		vs = append(vs, Violation{Property: LeftoverGrant, Key: p.Key, Ops: []int{s.ID, p.ID},
			Clients: []int{p.Client}, Nodes: []int{p.Node}, Start: s.Complete + allowance, End: p.Complete, Since: s.Invoke,
			Detail: fmt.Sprintf("node %d still held %q for client %d %v after its %s %d returned (allowance %v)",
				p.Node, p.Value, p.Client, p.Invoke-s.Complete, s.Kind, s.ID, allowance)})
	}
	return vs
}

func cmpDur(a, b time.Duration) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// releaseP99 is the 99th percentile of the latency of h's releases that
// settled (OK or lock lost), 0 without any: the value a hundredth of them
// exceed, so that the slowest one (a client paused in its Unlock) never
// sets it alone. Acquires are no stand-in: their latency counts waits
// behind holders.
func releaseP99(h history.History) time.Duration {
	var rel []time.Duration
	for _, op := range h.Ops {
		if op.Kind == history.KindRelease && (op.Outcome == history.OK || op.Outcome == history.LockLost) {
			rel = append(rel, op.Complete-op.Invoke)
		}
	}
	if len(rel) < 2 {
		return 0
	}
	slices.Sort(rel)
	return rel[(len(rel)-1)*99/100]
}
