// Package fault names the faults of the chaos harness. Kind is the one
// vocabulary that the --faults flag, the fault schedule (package backend),
// the history and its checker (package history) and the report share; every
// list of kinds elsewhere is derived from the table here. A Kind says what
// it targets (a node or a client), whether it takes its node out of the
// quorum while it lasts, whether it breaks an assumption the lock rests
// on, so that violations under it are expected rather than bugs, which
// schedules inject it (Scheduled, Hunted), and whether it needs nodes with
// replicas (NeedsReplicas).
package fault

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Kind names a kind of fault, as the CLI's --faults flag spells it.
type Kind string

// The fault kinds. Node faults act on a node index; client faults (see
// Kind.ClientSide) on a workload client.
const (
	Kill               Kind = "kill"                 // SIGKILL, held, then started again with its data
	Restart            Kind = "restart"              // stopped and started again at once, with its data (AOF, fsync always)
	RestartWithoutData Kind = "restart-without-data" // stopped and started again empty: amnesia
	DelayedRestart     Kind = "delayed-restart"      // down for longer than the largest TTL, then back empty
	Pause              Kind = "pause"                // SIGSTOP (docker pause), held, then resumed
	Partition          Kind = "partition"            // unreachable (bytes dropped), held, then healed
	Latency            Kind = "latency"              // every round trip slowed, held, then removed
	ClockSkew          Kind = "clock-skew"           // the node's clock jumps or runs fast (libfaketime), held, then real again
	KillDuringAcquire  Kind = "kill-during-acquire"  // SIGKILL as an acquire's script is about to reach the node, then started again
	ClientPause        Kind = "client-pause"         // a holder stops past its validity (a GC pause), then acts as holder
	ClientClockSkew    Kind = "client-clock-skew"    // a client's clock runs slow, so it works past its real validity
	LoseReplies        Kind = "lose-replies"         // requests reach the node and are applied, every reply is dropped, held, then healed
	LateWrite          Kind = "late-write"           // a former holder writes with its old token after its hold ended
	DropHeal           Kind = "drop-heal"            // the heals clients send to lagging fence counters are lost on the way to the node
	DelayHeal          Kind = "delay-heal"           // the heals clients send to lagging fence counters reach the node about a TTL late
	ClockDrift         Kind = "clock-drift"          // the node's clock runs fast within the lock's drift allowance (libfaketime), held, then real again
	Failover           Kind = "failover"             // the node's primary fails over to its replica, which lacks the newest writes; held, then the old primary rejoins as a replica
)

// traits is what the table says of a kind.
type traits struct {
	client bool // acts on a client, not a node
	down   bool // the node serves no client while it lasts
	breaks bool // breaks an assumption of mutual exclusion: its violations under it are expected
	loses  bool // the node comes back without its data, fence counters included
	sched  bool // a random schedule injects it (package backend's NewPlan)
	hunted bool // the hunt's schedule injects it (package backend's NewHuntPlan)
	// replicas: it needs nodes that are a primary with a replica; a
	// schedule injects it only when asked for, on such nodes
	replicas bool
}

// table lists every kind, in the order Kinds returns them.
var table = []struct {
	kind Kind
	traits
}{
	{Kill, traits{down: true, sched: true, hunted: true}},
	{Restart, traits{down: true, sched: true, hunted: true}},
	{RestartWithoutData, traits{down: true, breaks: true, loses: true, sched: true, hunted: true}},
	{DelayedRestart, traits{down: true, loses: true, sched: true}},
	{Pause, traits{down: true, sched: true}},
	{Partition, traits{down: true, sched: true, hunted: true}},
	{Latency, traits{sched: true, hunted: true}},
	{ClockSkew, traits{breaks: true, sched: true, hunted: true}},
	{KillDuringAcquire, traits{down: true}}, // fired by a client's acquire, not a schedule
	{ClientPause, traits{client: true, breaks: true}},
	{ClientClockSkew, traits{client: true, breaks: true}},
	{LoseReplies, traits{down: true, sched: true, hunted: true}},
	{LateWrite, traits{client: true, breaks: true}},
	{DropHeal, traits{hunted: true}},
	{DelayHeal, traits{hunted: true}},
	{ClockDrift, traits{hunted: true}},
	// Asynchronous replication: the promoted replica lacks the writes its
	// primary acknowledged last, lock keys and fence counter increments.
	{Failover, traits{down: true, breaks: true, loses: true, sched: true, replicas: true}},
}

func (k Kind) traits() (traits, bool) {
	for _, e := range table {
		if e.kind == k {
			return e.traits, true
		}
	}
	return traits{}, false
}

// Known reports whether k is one of the kinds of this package.
func (k Kind) Known() bool { _, ok := k.traits(); return ok }

// ClientSide reports whether the fault acts on a client rather than a node.
func (k Kind) ClientSide() bool { t, _ := k.traits(); return t.client }

// TakesNodeDown reports whether, while the fault lasts, its node serves no
// client, so that it does not count toward a quorum.
func (k Kind) TakesNodeDown() bool { t, _ := k.traits(); return t.down }

// BreaksAssumptions reports whether the fault breaks an assumption of the
// lock (timing, or nodes keeping their data): mutual exclusion may fail
// under it, and such violations are expected. Fencing must still keep a
// store correct.
func (k Kind) BreaksAssumptions() bool { t, _ := k.traits(); return t.breaks }

// LosesData reports whether the node comes back from the fault without its
// data, or without the newest of it (a failover): its keys (harmless for mutual exclusion after a delayed restart,
// since they have expired everywhere by then) and its fence counters. Token
// order and uniqueness rest on the counters of a majority surviving until an
// acquisition heals the lagging ones: two or three nodes that lose them in
// turn before anything heals them can hand out a smaller token, so such
// violations are expected under these kinds. (AOF with appendfsync always,
// and restarts with data, are what strict fencing needs.)
func (k Kind) LosesData() bool { t, _ := k.traits(); return t.loses }

// Scheduled reports whether a random schedule of node faults (package
// backend's NewPlan) injects the fault.
func (k Kind) Scheduled() bool { t, _ := k.traits(); return t.sched }

// NeedsReplicas reports whether the fault needs nodes that are each a
// primary with a replica (a failover): it is injected only on such nodes,
// and only when asked for, since it breaks an assumption.
func (k Kind) NeedsReplicas() bool { t, _ := k.traits(); return t.replicas }

// Hunted reports whether the hunt's schedule (package backend's
// NewHuntPlan) injects the fault.
func (k Kind) Hunted() bool { t, _ := k.traits(); return t.hunted }

// Kinds returns every kind, in a fixed order.
func Kinds() []Kind { return where(func(traits) bool { return true }) }

// Tolerated returns the kinds under which mutual exclusion's assumptions
// hold: a checker must find no violation of it under them. (A delayed
// restart is tolerated so, as Redlock prescribes it, but loses fence
// counters: see LosesData.)
func Tolerated() []Kind { return where(func(t traits) bool { return !t.breaks }) }

// AssumptionBreaking returns the kinds that break an assumption of the lock.
func AssumptionBreaking() []Kind { return where(func(t traits) bool { return t.breaks }) }

func where(keep func(traits) bool) []Kind {
	var ks []Kind
	for _, e := range table {
		if keep(e.traits) {
			ks = append(ks, e.kind)
		}
	}
	return ks
}

// ErrUnknown is wrapped by the errors for a kind this package does not know.
var ErrUnknown = errors.New("fault: unknown kind")

// Parse splits a comma-separated list of kinds ("kill, pause,latency"),
// ignoring spaces, empty items and repeats, and checks each. An empty list
// gives nil and no error.
func Parse(s string) ([]Kind, error) {
	var kinds []Kind
	for f := range strings.SplitSeq(s, ",") {
		k := Kind(strings.TrimSpace(f))
		if k == "" || slices.Contains(kinds, k) {
			continue
		}
		if !k.Known() {
			return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknown, k, Join(Kinds()))
		}
		kinds = append(kinds, k)
	}
	return kinds, nil
}

// Join writes kinds as Parse reads them: "kill,pause".
func Join(kinds []Kind) string {
	s := make([]string, len(kinds))
	for i, k := range kinds {
		s[i] = string(k)
	}
	return strings.Join(s, ",")
}
