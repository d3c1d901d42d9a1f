package schedule

import (
	"time"

	"github.com/fencedlock/fencedlock/chaos/backend"
	"github.com/fencedlock/fencedlock/chaos/fault"
)

// The hunt's timing episodes: faults a lock must bear on every node at once
// (they keep the nodes up and stay within its assumptions), aimed at the
// validity it computes.

// DriftSpec is the clock of the hunt's drifting nodes, in libfaketime's
// FAKETIME syntax: 1% fast. A key set for a TTL there lives TTL/1.01 of real
// time, 0.99% of the TTL less, which is inside the drift allowance a lock
// keeps by default (redlock: 1% of the TTL plus 2ms).
const DriftSpec = "+0 x1.01"

// slowMajority adds latency, about a sixteenth of the TTL per round trip
// (several times the drift allowance, well under a node timeout), to a
// majority of the nodes in four bursts, each half a TTL on and then more
// than a TTL off: an acquisition made during a burst takes the latency (at
// least one node of its quorum is slow), and a hold kept to its validity
// ends after the burst, before the next, when the next acquisition is fast. A validity that
// does not take off the time the acquisition took outlasts the keys by
// about half the latency (the proxy delays the request half of it) less the
// allowance, and the next holder overlaps it.
func (h *hunt) slowMajority(at time.Duration) ([]Step, []Window, time.Duration) {
	d := h.ttl / 16
	slow := h.perm()[:h.nodes/2+1]
	var steps []Step
	for range 4 {
		on := h.ttl / 2
		for _, n := range slow {
			steps = append(steps, Step{At: at, For: on, Kind: fault.Latency, Node: n, Fault: backend.Latency{Node: n, D: d}})
		}
		at += on + h.between(11*h.ttl/10, 5*h.ttl/4)
	}
	return steps, nil, at
}

// driftingMajority runs the clocks of a majority of the nodes fast
// (DriftSpec) for four to six TTLs, their restarts onto the fake clock a
// quarter TTL apart (a clock change restarts the node, with its data). Keys
// there expire early by just under the drift allowance: a lock that keeps
// the allowance holds no longer than its keys live on a majority; one that
// keeps none overlaps the next holder by up to 1% of the TTL.
func (h *hunt) driftingMajority(at time.Duration) ([]Step, []Window, time.Duration) {
	drifting := h.perm()[:h.nodes/2+1]
	hold := h.between(4*h.ttl, 6*h.ttl)
	end := at + time.Duration(len(drifting)-1)*h.ttl/4 + hold
	var steps []Step
	for i, n := range drifting {
		start := at + time.Duration(i)*h.ttl/4
		steps = append(steps, Step{At: start, For: end - start, Kind: fault.ClockDrift, Node: n,
			Fault: backend.ClockSkew{Node: n, Spec: DriftSpec}})
	}
	return steps, nil, end
}
