package checker

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/history"
)

// Handover is how fast keys passed from a holder that released them to the
// clients waiting for them: the slowness that neither Liveness nor
// Starvation sees, since a lock whose waiters only poll still hands every
// key on well within their thresholds.
//
// A handover is an Unlock that succeeded (outcome ok: the key was released
// on a quorum) while another client was acquiring the key (an acquire of
// theirs in flight during the Unlock call). Its gap is the time from the
// Unlock's return to the return of the next successful acquire of the key,
// by anyone, that returned after the Unlock was called; zero when that
// acquire returned first, as a waiter woken by the release can before the
// releaser hears back from its last node. A handover is measured only while
// every node was up and answering at its usual speed: none under a fault
// that TakesNodeDown or slows the node (fault.Latency) at any moment from
// the Unlock's call to that acquire's return.
//
// The handovers of every key are pooled (how fast a lock hands a key on does
// not depend on the key, and the keys of a run share its few handovers). A
// median gap longer than the threshold is a handover violation, in the
// verdict like any other, shown on its median handover. The default
// threshold is derived from the history itself: handoverFactor times the
// median latency of the successful releases (one round trip to the nodes
// with nobody to wait for: how slow the machine and the network were in this
// run). A lock that wakes its waiters when the key is released (redlock does,
// through pub/sub) hands a key on in about two round trips, whatever the
// holds: a release, and an acquire; one whose waiters poll hands it on when
// their backoff or the holder's TTL runs out, later the longer they waited.
// The median, not a mean or a maximum, so that the odd waiter that a loaded
// machine's scheduler held back does not decide. It is judged only on at
// least handoverSamples handovers: with fewer, the median says little, and
// the gaps are measured, not judged.
type Handover struct {
	Checked   bool          // false when no handover was measured
	Judged    bool          // enough handovers were measured, and a threshold applied
	Samples   int           // handovers measured
	Median    time.Duration // their median gap
	Slowest   time.Duration // their longest gap
	Key       string        // the key of the median handover
	Threshold time.Duration // zero when not judged
	OK        bool          // the median gap is within the threshold (true when not checked or not judged)
}

// Handover's defaults: the median gap may be handoverFactor times the median
// release latency, and is judged on at least handoverSamples handovers.
// Calibrated on loaded runs: a lock that wakes its waiters has medians of one
// to three release latencies; one that leaves them to their backoff, of six
// and more under the hunt's long holds.
const (
	handoverFactor  = 5
	handoverSamples = 16
)

// handoff is one handover: the release that let a key go while others
// waited, and the acquire that took it next.
type handoff struct {
	release, acquire history.Op
	gap              time.Duration
}

// handover measures the handovers of h and returns the summary and a
// violation when their median gap is over the threshold.
func handover(h history.History, faults []FaultSpan, o CheckOptions) (Handover, []Violation) {
	s := Handover{OK: true}
	hs := handoffs(h, faults)
	if len(hs) == 0 {
		return s, nil
	}
	slices.SortStableFunc(hs, func(a, b handoff) int { return cmp.Compare(a.gap, b.gap) })
	med := hs[(len(hs)-1)/2]
	s.Checked, s.Samples, s.Median, s.Slowest, s.Key = true, len(hs), med.gap, hs[len(hs)-1].gap, med.release.Key
	threshold := o.HandoverThreshold
	if threshold == 0 {
		threshold = handoverFactor * releaseTrip(h)
	}
	if len(hs) < handoverSamples || threshold <= 0 {
		return s, nil
	}
	s.Judged, s.Threshold = true, threshold
	if med.gap <= threshold {
		return s, nil
	}
	s.OK = false
	return s, []Violation{{
		Property: SlowHandover, Key: med.release.Key,
		Ops:     []int{med.release.ID, med.acquire.ID},
		Clients: []int{med.release.Client, med.acquire.Client},
		Start:   med.release.Complete, End: med.release.Complete + med.gap, Since: med.release.Invoke,
		Detail: fmt.Sprintf("keys went from a release to the next acquire in a median %v over %d handovers with every node up (threshold %v); the median one: release %d of %q by %s, then acquire %d by %s",
			med.gap.Round(time.Millisecond), len(hs), threshold.Round(time.Millisecond),
			med.release.ID, med.release.Key, h.ClientName(med.release.Client), med.acquire.ID, h.ClientName(med.acquire.Client)),
	}}
}

// handoffs returns the handovers of h during which no node was down or
// slowed, in the order of their releases.
func handoffs(h history.History, faults []FaultSpan) []handoff {
	asked := map[string][]history.Op{}
	for _, op := range h.Ops {
		if op.Kind == history.KindAcquire {
			asked[op.Key] = append(asked[op.Key], op)
		}
	}
	keys := make(map[string]*acquiresOf, len(asked))
	for key, ops := range asked {
		keys[key] = newAcquiresOf(ops, h.End)
	}
	slow := newSlowedIndex(faults)
	var out []handoff
	for _, rel := range h.Ops {
		k := keys[rel.Key]
		if rel.Kind != history.KindRelease || rel.Outcome != history.OK || k == nil || !k.waited(rel) {
			continue
		}
		i, _ := slices.BinarySearchFunc(k.granted, rel.Invoke, func(a history.Op, t time.Duration) int {
			return cmp.Compare(a.Complete, t+1) // the first that returned after the release was called
		})
		if i == len(k.granted) {
			continue
		}
		next := k.granted[i]
		if !slow.during(rel.Invoke, next.Complete) {
			out = append(out, handoff{release: rel, acquire: next, gap: max(next.Complete-rel.Complete, 0)})
		}
	}
	return out
}

// acquiresOf is what handoffs knows of the acquires of one key.
type acquiresOf struct {
	invoked []time.Duration // every acquire's invocation, in order
	// inflight[p] is the latest end, per client, of the first p acquires by
	// invocation (the end of the history for one that never returned).
	inflight []latest
	granted  []history.Op // the successful ones, by return
}

func newAcquiresOf(ops []history.Op, end time.Duration) *acquiresOf {
	slices.SortStableFunc(ops, func(a, b history.Op) int { return cmp.Compare(a.Invoke, b.Invoke) })
	k := &acquiresOf{invoked: make([]time.Duration, len(ops)), inflight: make([]latest, len(ops)+1)}
	k.inflight[0] = latest{}.init()
	for i, a := range ops {
		done := a.Complete
		if a.Outcome == history.Pending {
			done = end
		}
		k.invoked[i] = a.Invoke
		k.inflight[i+1] = k.inflight[i].add(a.Client, done)
		if a.Outcome == history.OK {
			k.granted = append(k.granted, a)
		}
	}
	slices.SortStableFunc(k.granted, func(a, b history.Op) int { return cmp.Compare(a.Complete, b.Complete) })
	return k
}

// waited reports whether a client other than rel's had an acquire in flight
// at some moment of the release rel: one called before rel returned that
// ended after rel was called.
func (k *acquiresOf) waited(rel history.Op) bool {
	p, _ := slices.BinarySearch(k.invoked, rel.Complete) // those called before rel returned
	return k.inflight[p].except(rel.Client) > rel.Invoke
}

// slowedIndex answers whether a node was down or slowed at some moment of an
// interval: the faults that TakesNodeDown or slow a node (fault.Latency), by
// start, with the latest end among each prefix.
type slowedIndex struct {
	starts []time.Duration
	ends   []time.Duration // ends[i]: the latest end of the first i+1
}

func newSlowedIndex(faults []FaultSpan) slowedIndex {
	var fs []FaultSpan
	for _, f := range faults {
		if f.Kind.TakesNodeDown() || f.Kind == fault.Latency {
			fs = append(fs, f)
		}
	}
	slices.SortFunc(fs, func(a, b FaultSpan) int { return cmp.Compare(a.Start, b.Start) })
	var x slowedIndex
	for i, f := range fs {
		x.starts = append(x.starts, f.Start)
		end := f.End
		if i > 0 {
			end = max(end, x.ends[i-1])
		}
		x.ends = append(x.ends, end)
	}
	return x
}

// during reports whether a node was down or slowed at some moment of
// [from, to].
func (x slowedIndex) during(from, to time.Duration) bool {
	p, _ := slices.BinarySearch(x.starts, to+1) // those started by to
	return p > 0 && x.ends[p-1] >= from
}

// releaseTrip returns the median latency of the successful releases of h,
// zero when there were none.
func releaseTrip(h history.History) time.Duration {
	var ds []time.Duration
	for _, op := range h.Ops {
		if op.Kind == history.KindRelease && op.Outcome == history.OK {
			ds = append(ds, op.Complete-op.Invoke)
		}
	}
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[(len(ds)-1)/2]
}
