package report

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/fencedlock/fencedlock/chaos/checker"
	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/history"
)

// Incident is a group of violations with one cause: violations of one
// property, blamed on the same faults, that share a hold (directly, or
// through a chain of holds that share one). A holder paused past its
// validity overlaps every short hold that follows it: one incident, not one
// per overlap.
type Incident struct {
	Property   checker.Property `json:"property"`
	Key        string           `json:"key"`
	Violations int              `json:"violations"`
	StartMs    float64          `json:"start_ms"` // the earliest violation's start
	EndMs      float64          `json:"end_ms"`   // the latest violation's end
	Faults     []fault.Kind     `json:"faults"`
	Expected   bool             `json:"expected"`
	// Hold is the op every violation of the incident involves (the paused
	// hold's acquire, say); 0 when there is none.
	Hold   int    `json:"hold,omitempty"`
	Reason string `json:"reason"` // why it is expected, or why not, in one line
	Detail string `json:"detail"` // the first violation's detail

	first int // index of the first violation in the checker's Result.Violations
}

// incidents groups vs (see Incident), unexpected ones first, then by time.
func incidents(h history.History, vs []checker.Violation) []Incident {
	parent := make([]int, len(vs))
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		if parent[i] != i {
			parent[i] = find(parent[i])
		}
		return parent[i]
	}
	// Violations of one cause that involve one op join its group.
	byOp := map[string]int{}
	for i, v := range vs {
		cause := fmt.Sprint(v.Property, v.Expected, v.Faults)
		for _, op := range v.Ops {
			k := fmt.Sprint(cause, op)
			if j, ok := byOp[k]; ok {
				parent[find(i)] = find(j)
			} else {
				byOp[k] = i
			}
		}
	}
	groups := map[int][]int{}
	var roots []int
	for i := range vs {
		r := find(i)
		if _, ok := groups[r]; !ok {
			roots = append(roots, r)
		}
		groups[r] = append(groups[r], i)
	}
	out := make([]Incident, 0, len(roots))
	for _, r := range roots {
		members := groups[r]
		v := vs[members[0]]
		in := Incident{Property: v.Property, Key: v.Key, Violations: len(members), StartMs: ms(v.Start), EndMs: ms(v.End),
			Faults: v.Faults, Expected: v.Expected, Detail: v.Detail, first: members[0]}
		seen := map[int]int{}
		for _, m := range members {
			in.StartMs, in.EndMs = min(in.StartMs, ms(vs[m].Start)), max(in.EndMs, ms(vs[m].End))
			for _, op := range vs[m].Ops {
				seen[op]++
			}
		}
		if len(members) > 1 {
			for op, n := range seen {
				if n == len(members) && (in.Hold == 0 || op < in.Hold) {
					in.Hold = op
				}
			}
		}
		in.Reason = blameReason(v)
		if in.Hold > 0 && in.Hold <= len(h.Ops) {
			op := h.Ops[in.Hold-1]
			in.Detail = fmt.Sprintf("%d violations involve hold %d (%s, token %d); first: %s",
				len(members), in.Hold, h.ClientName(op.Client), op.Token, v.Detail)
		}
		out = append(out, in)
	}
	slices.SortStableFunc(out, func(a, b Incident) int {
		return cmp.Or(cmp.Compare(boolInt(a.Expected), boolInt(b.Expected)), cmp.Compare(a.StartMs, b.StartMs))
	})
	return out
}

// blameReason says in one line why the checker took v as expected or not,
// from the faults it blamed.
func blameReason(v checker.Violation) string {
	var breaking, tolerated []string
	for _, k := range v.Faults {
		if k.BreaksAssumptions() {
			breaking = append(breaking, fmt.Sprintf("%s (%s)", k, assumption(k)))
		} else {
			tolerated = append(tolerated, string(k))
		}
	}
	switch {
	case v.Expected && len(breaking) == 0:
		// Order and the node guarantees are promised with every node up.
		return "expected: " + string(v.Property) + " is promised only with every node up, and " +
			strings.Join(tolerated, ", ") + " was active"
	case v.Expected:
		return "expected: " + strings.Join(breaking, "; ") + ": outside the lock's assumptions"
	case v.Property == checker.StaleWritesAccepted || v.Property == checker.LostWrites:
		return "unexpected: the fenced store must stay correct under every fault"
	case len(v.Faults) == 0:
		return "unexpected: no fault was active to explain it"
	case len(breaking) == 0:
		return "unexpected: only " + strings.Join(tolerated, ", ") + " was active, which the lock tolerates"
	}
	return "unexpected: blamed on " + strings.Join(breaking, "; ") + ", not taken as an excuse for " + string(v.Property) + " in this check (--strict?)"
}

// assumption says what a fault kind did that the lock assumes does not
// happen.
func assumption(k fault.Kind) string {
	switch k {
	case fault.ClientPause:
		return "a holder paused past its validity"
	case fault.ClientClockSkew:
		return "a client clock ran slow"
	case fault.ClockSkew:
		return "a node clock jumped"
	case fault.RestartWithoutData:
		return "a node came back empty"
	case fault.Failover:
		return "a promoted replica lacked the newest grants"
	case fault.LateWrite:
		return "a former holder wrote after its hold"
	}
	if k.LosesData() {
		return "a node lost its data"
	}
	return "breaks an assumption of the lock"
}
