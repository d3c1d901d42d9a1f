package checker

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/history"
)

// order finds, for a lock that serves waiters in the order they began to
// wait, the clients overtaken by one that began after them: for a key, an
// acquire a of client A and a successful acquire b of another client B,
// where b was invoked more than margin after a, b returned before a did (or
// a never returned), and the key was held, by a client other than A, when a
// was invoked. A's first try was then refused, so A had entered its place
// before B began: b should have waited for a. The margin covers how long a
// refused first try takes to enter its place on a quorum, and the clients'
// clocks, on which the wait starts are read, disagreeing with the history's.
//
// Each grant counts once, naming the oldest waiter it overtook. A lock that hands the key on within one process, past that process's
// other waiters, is not judged here: a client is taken to be a process.
func order(h history.History, spans []Span, margin time.Duration) []Violation {
	acquires := map[string][]history.Op{}
	for _, op := range h.Ops {
		if op.Kind == history.KindAcquire {
			acquires[op.Key] = append(acquires[op.Key], op)
		}
	}
	holds := map[string][]Span{}
	for _, sp := range spans {
		holds[sp.Key] = append(holds[sp.Key], sp)
	}
	var vs []Violation
	for _, key := range slices.Sorted(maps.Keys(acquires)) {
		vs = append(vs, overtakes(h, key, acquires[key], holds[key], margin)...)
	}
	return sortViolations(vs)
}

// overtakes returns the violations of order on one key, in O(n log n): with
// the acquires sorted by invocation, the waiters older than a grant by more
// than the margin are a prefix, and the oldest of them still waiting when
// the grant returned is found by binary search over that prefix's latest
// returns.
func overtakes(h history.History, key string, acquires []history.Op, holds []Span, margin time.Duration) []Violation {
	slices.SortFunc(acquires, func(a, b history.Op) int { return cmp.Or(cmp.Compare(a.Invoke, b.Invoke), cmp.Compare(a.ID, b.ID)) })
	held := heldAt(holds)
	// waiting[p] is the latest return, per client, of the first p acquires
	// that began while another client held the key.
	waiting := make([]latest, len(acquires)+1)
	waiting[0] = latest{}.init()
	for i, a := range acquires {
		waiting[i+1] = waiting[i]
		if held(a.Client, a.Invoke) {
			end := a.Complete
			if a.Outcome == history.Pending {
				end = math.MaxInt64
			}
			waiting[i+1] = waiting[i+1].add(a.Client, end)
		}
	}
	var vs []Violation
	for _, b := range acquires {
		if b.Outcome != history.OK {
			continue
		}
		older := sort.Search(len(acquires), func(i int) bool { return acquires[i].Invoke >= b.Invoke-margin })
		// The first prefix holding a waiter of another client that b's
		// grant came before: its last acquire is that waiter.
		p := sort.Search(older+1, func(p int) bool { return waiting[p].except(b.Client) > b.Complete })
		if p > older {
			continue
		}
		a := acquires[p-1]
		wait := "still waited"
		if a.Outcome == history.Pending {
			wait = "waited to the end"
		}
		vs = append(vs, Violation{
			Property: Order, Key: key, Ops: []int{a.ID, b.ID}, Clients: []int{a.Client, b.Client},
			Start: b.Invoke, End: b.Complete, Since: a.Invoke,
			Detail: fmt.Sprintf("%s got %q at %v, having begun %v after %s, which began waiting for it at %v, while it was held, and %s (margin %v)",
				h.ClientName(b.Client), key, b.Complete.Round(time.Millisecond), (b.Invoke - a.Invoke).Round(time.Millisecond),
				h.ClientName(a.Client), a.Invoke.Round(time.Millisecond), wait, margin),
		})
	}
	return vs
}

// heldAt returns a function that reports whether a hold of a client other
// than client covered t (from its start to when its client should have
// stopped acting as holder: the key is on its nodes at least that long).
func heldAt(holds []Span) func(client int, t time.Duration) bool {
	slices.SortFunc(holds, func(a, b Span) int { return cmp.Compare(a.Start, b.Start) })
	ends := make([]latest, len(holds)+1) // ends[p]: the latest end per client of the first p holds
	ends[0] = latest{}.init()
	for i, sp := range holds {
		ends[i+1] = ends[i].add(sp.Client, sp.Believed)
	}
	return func(client int, t time.Duration) bool {
		p := sort.Search(len(holds), func(i int) bool { return holds[i].Start > t })
		return ends[p].except(client) > t
	}
}

// latest is the greatest of a set of times tagged with clients, and the
// greatest of those of the other clients: enough to answer, for any one
// client, the greatest time of the others.
type latest struct {
	client int
	end    time.Duration // the greatest, of client
	other  time.Duration // the greatest of the other clients
}

// never is the time of an empty latest.
const never = time.Duration(math.MinInt64)

func (l latest) init() latest { return latest{end: never, other: never} }

func (l latest) add(client int, end time.Duration) latest {
	switch {
	case end > l.end:
		if client != l.client {
			l.other = l.end
		}
		l.client, l.end = client, end
	case client != l.client && end > l.other:
		l.other = end
	}
	return l
}

// except returns the greatest time of a client other than client.
func (l latest) except(client int) time.Duration {
	if l.client == client {
		return l.other
	}
	return l.end
}

// orderBreaking returns the fault kinds under which order may fail: every
// node fault and every assumption-breaking one.
func orderBreaking() []fault.Kind {
	var ks []fault.Kind
	for _, k := range fault.Kinds() {
		if !k.ClientSide() || k.BreaksAssumptions() {
			ks = append(ks, k)
		}
	}
	return ks
}
