package checker

import (
	"maps"
	"slices"
	"time"

	"github.com/fencedlock/fencedlock/chaos/history"
)

// stallThresholds gives each key its liveness stall threshold (see
// Liveness): the one CheckOptions gives, or else twice the key's lease plus
// four times the p99 latency of the history's releases.
//
// The lease is the key's own: a waiter for one key sits out that key's TTL,
// never another's, so a key with an hour-long lease must not let a 30 ms one
// stall for an hour. A key never granted with a validity end (its TTL is not
// in the history) takes the longest lease of the history, the most lenient
// threshold there is. The release latency is pooled over every key: a
// release is one round trip to the nodes whatever the key, and measures how
// slow the machine and the network were.
type stallThresholds struct {
	given   time.Duration            // CheckOptions.StallThreshold; 0 means derived
	lease   map[string]time.Duration // per key, its longest lease
	longest time.Duration            // the longest lease of any key; 0 when none has a validity end
	trip    time.Duration            // the p99 release latency (acquire latency when no release)
}

// newStallThresholds derives the thresholds of h's keys, given is the one
// CheckOptions gives (0: derived).
func newStallThresholds(h history.History, given time.Duration) stallThresholds {
	t := stallThresholds{given: given, lease: map[string]time.Duration{}}
	var rel, acq []time.Duration
	for _, op := range h.Ops {
		switch {
		case op.Kind == history.KindAcquire && op.Outcome == history.OK:
			acq = append(acq, op.Complete-op.Invoke)
			if lease := op.ValidUntil - op.Invoke; op.ValidUntil != 0 && lease > 0 {
				t.lease[op.Key] = max(t.lease[op.Key], lease)
				t.longest = max(t.longest, lease)
			}
		case op.Kind == history.KindRelease && (op.Outcome == history.OK || op.Outcome == history.LockLost):
			rel = append(rel, op.Complete-op.Invoke)
		}
	}
	// A release is one round trip to the nodes, with nobody to wait for:
	// how slow the machine and the network were. Without releases, the
	// acquires' latency, waits behind holders included, is a looser stand-in.
	trip := rel
	if len(trip) == 0 {
		trip = acq
	}
	if len(trip) > 0 {
		slices.Sort(trip)
		t.trip = trip[max((len(trip)*99+99)/100, 1)-1]
	}
	return t
}

// judged reports whether stalls are judged: a threshold was given, or the
// history has a validity end to derive one from.
func (t stallThresholds) judged() bool { return t.given > 0 || t.longest > 0 }

// of returns the threshold of key, 0 when stalls are not judged.
func (t stallThresholds) of(key string) time.Duration {
	switch {
	case t.given > 0:
		return t.given
	case t.longest <= 0:
		return 0
	}
	lease, ok := t.lease[key]
	if !ok {
		lease = t.longest
	}
	return 2*lease + 4*t.trip
}

// least returns the least threshold of any key, the strictest applied; 0
// when stalls are not judged.
func (t stallThresholds) least() time.Duration {
	if t.given > 0 || t.longest <= 0 {
		return t.given
	}
	return 2*slices.Min(slices.Collect(maps.Values(t.lease))) + 4*t.trip
}
