package protomodel

import "fmt"

// Timing says what the model assumes about clocks.
type Timing uint8

const (
	// ExactClocks: a node keeps a key at least until the validity of the
	// attempt that set it ran out on the client's clock (bounded drift, with
	// the bound taken as exact). Mutual exclusion is checked.
	ExactClocks Timing = iota
	// AnyTiming: no timing assumption at all. Any key may expire at any
	// moment, any validity may run out at any moment (a fast node clock, a
	// slow client clock, a paused process). Mutual exclusion is not claimed
	// and not checked unless Config.CheckExclusion says so.
	AnyTiming
)

//go:norace
func (t Timing) String() string {
	if t == AnyTiming {
		return "any timing"
	}
	return "exact clocks"
}

// Variant plants one deviation from the protocol, or drops one assumption.
type Variant uint8

const (
	Correct Variant = iota
	// RaiseWithoutOwnership: the raise script lifts the counter and counts
	// toward the token's quorum even where this hold's key is gone.
	RaiseWithoutOwnership
	// NoRaise: the token is the highest counter among the grants, whether or
	// not a quorum of nodes has it.
	NoRaise
	// HealLowers: the heal sets the counter to the token (SET) instead of
	// max(counter, token), so a late heal can lower it.
	HealLowers
	// AmnesiaUnhealed: a node may restart empty although, when it crashed,
	// it was one of a bare majority that had the highest counter (the heals
	// had not landed).
	AmnesiaUnhealed
	// AmnesiaEarly: a node may restart empty before the acquisitions that
	// were in flight when it crashed have decided (a restart not delayed).
	AmnesiaEarly
	// SkewedNodes: the keys on the first Config.Skewed nodes may expire
	// before the validity of their hold ran out (node clocks running fast
	// beyond the drift bound).
	SkewedNodes
	// Pause: a holder keeps acting after its validity ran out, until it
	// unlocks (a process pause longer than the validity).
	Pause
	// LateGrantKept: a grant whose reply comes after the attempt failed or
	// was unlocked is not released (attempt.settle left out).
	LateGrantKept
	// Barging: acquire ignores the waiting set (first is always true): a
	// newcomer is granted a free key ahead of the head.
	Barging
	// GrantRemovesEntry: the rule as first proposed. A grant removes the
	// caller's entry, also the grant of a try that then fails (too few
	// grants) or had already failed (a late grant), and no release touches
	// the waiting set. The caller's place moves from node to node while a
	// younger waiter collects the nodes it left.
	GrantRemovesEntry
	// ReacquireOverwrites (with Reacquire): the re-create is a plain SET,
	// not SET NX: an extension overwrites another hold's key and counts it.
	ReacquireOverwrites
	// ReacquireCountsRefusal (with Reacquire): the extension counts every
	// answer as a yes, also a node's refusal (another value holds the key,
	// so its re-create failed).
	ReacquireCountsRefusal
	// ReacquireUnreleased (with Reacquire): Unlock leaves out the nodes that
	// refused the acquire, as without the option, although an extension sent
	// since may have re-created the key there.
	ReacquireUnreleased
	// LateGrantSteppedBack: a late grant (its call had timed out) that
	// answers while its attempt is still deciding is stepped back at once,
	// as redlock first did, instead of being settled at the decision like
	// the failed call it is. If the attempt wins, that release carries the
	// hold's own value; sent again (owe.go) or landing late, it can run
	// after an extension counted its node, and delete the key there
	// (docs/protocol.md, section 4).
	LateGrantSteppedBack
	// RollingMidExtension (with Rolling): drops half of the rolling-restart
	// assumption. A node restarts empty while the hold whose key it has is
	// extending: the extension may have counted its yes already.
	RollingMidExtension
)

var variantNames = [...]string{
	Correct:                "correct",
	RaiseWithoutOwnership:  "raise without ownership check",
	NoRaise:                "no raise",
	HealLowers:             "heal that lowers a counter",
	AmnesiaUnhealed:        "amnesia left unhealed",
	AmnesiaEarly:           "amnesia while an acquisition is in flight",
	SkewedNodes:            "skewed node clocks",
	Pause:                  "process pause longer than the validity",
	LateGrantKept:          "late grant kept",
	Barging:                "barging",
	GrantRemovesEntry:      "grant removes the entry",
	ReacquireOverwrites:    "re-create overwrites",
	ReacquireCountsRefusal: "extension counts a refusal",
	ReacquireUnreleased:    "re-created key left out of the Unlock",
	LateGrantSteppedBack:   "late grant stepped back while deciding",
	RollingMidExtension:    "rolling restart while an extension decides",
}

//go:norace
func (v Variant) String() string { return variantNames[v] }

// FairnessForm says which hypothesis the fairness check (Claim 6) puts on
// the older waiter A's entry before it forbids the younger B to return a
// Lock while A waits.
type FairnessForm uint8

const (
	// KeptQuorum: the nodes of a quorum Q held A's entry when B began
	// waiting, and none of them lost it since to a fault (its lease ran out,
	// the node restarted empty). Whatever the protocol itself does to the
	// entry is no excuse. The claim.
	KeptQuorum FairnessForm = iota
	// FixedQuorum: the nodes of one quorum Q held A's entry from before B
	// began waiting and still hold it, each without a gap, whatever removed
	// it elsewhere. Weaker: GrantRemovesEntry keeps it too.
	FixedQuorum
	// AnyQuorum: at every moment since B began waiting, some quorum held
	// A's entry (not always the same one).
	AnyQuorum
	// OnceQuorum: a quorum held A's entry when B began waiting, whatever
	// happened to it since. False as soon as an entry can be lost to a
	// fault; without faults it is KeptQuorum.
	OnceQuorum
)

var fairnessNames = [...]string{KeptQuorum: "", FixedQuorum: "fair=fixed-quorum", AnyQuorum: "fair=any-quorum", OnceQuorum: "fair=once-quorum"}

// Limits of the state layout.
const (
	MaxNodes     = 5
	MaxClients   = 3
	MaxPerClient = 3
	maxAttempts  = 6  // in all: Clients × Attempts
	maxCounter   = 63 // tokens are kept in a 64-bit set
)

// Config is one bound: the explorer visits every state reachable within it.
type Config struct {
	Nodes    int // N; the quorum is N/2+1
	Clients  int
	Attempts int // acquisitions per client, each acquire → hold → unlock
	Crashes  int // node crashes in a run (each may restart with or without data)
	Reasks   int // split-vote re-asks per attempt (redlock allows 3)
	Timeouts int // deadlines (a group of calls timing out) in a run
	GiveUps  int // attempts abandoned early (their ctx ended) in a run
	Expiries int // validities running out in a run
	// Retries: tries, in a run, that continue the wait of a client's failed
	// try (Lock trying again, same wait start); every other try begins a new
	// wait, younger than every wait begun before it.
	Retries int
	Leases  int // waiting-set entries whose lease runs out, in a run
	// Extends: extensions of holds (Lock.Extend, the watchdog's), in a run
	// in all. A hold extends only within its validity, one extension at a
	// time, once the calls of its previous one have all run.
	Extends int
	// Reacquire: the option WithReacquireOnExtend. An extension re-creates
	// the key where it is absent (SET NX PX, counter raised to the hold's
	// token) and counts it; once a hold has sent one, its Unlock releases on
	// every node.
	Reacquire bool
	// Rolling: rolling restarts. One node is down at a time, and it may
	// also come back empty while the key of a hold within its validity is
	// on it, provided that hold has no extension deciding and keeps its key
	// of its current epoch on a quorum of the other nodes (the rest of
	// assumption A stands).
	Rolling bool
	// PromptReplies: a reply reaches the client in the step the node ran
	// the call (a slow reply is still modelled by a timeout and a late
	// reply). A coarser network, for bounds that are too large otherwise.
	PromptReplies bool
	Init          []int  // initial fence counters, one per node (nil: all 0)
	Timing        Timing // what clocks do
	Variant       Variant
	Skewed        int // SkewedNodes: how many nodes have a fast clock
	// Fairness: the form of Claim 6 checked (the zero value is the claim).
	Fairness FairnessForm

	// CheckExclusion checks mutual exclusion even under AnyTiming (to show
	// the counterexample when the timing assumption is dropped).
	CheckExclusion bool
	// Unchecked lists properties not to check (to find a bug's effect on
	// another property than the one it breaks first).
	Unchecked []Property
	// MaxStates stops the search (0: no limit); the result says so.
	MaxStates int
}

//go:norace
func (c Config) quorum() int { return c.Nodes/2 + 1 }

//go:norace
func (c Config) validate() error {
	switch {
	case c.Nodes < 1 || c.Nodes > MaxNodes:
		return fmt.Errorf("protomodel: %d nodes, want 1..%d", c.Nodes, MaxNodes)
	case c.Clients < 1 || c.Clients > MaxClients:
		return fmt.Errorf("protomodel: %d clients, want 1..%d", c.Clients, MaxClients)
	case c.Attempts < 1 || c.Attempts > MaxPerClient:
		return fmt.Errorf("protomodel: %d attempts per client, want 1..%d", c.Attempts, MaxPerClient)
	case c.Clients*c.Attempts > maxAttempts:
		return fmt.Errorf("protomodel: %d attempts in all, want at most %d", c.Clients*c.Attempts, maxAttempts)
	case c.Init != nil && len(c.Init) != c.Nodes:
		return fmt.Errorf("protomodel: %d initial counters for %d nodes", len(c.Init), c.Nodes)
	case c.Skewed > c.Nodes:
		return fmt.Errorf("protomodel: %d skewed nodes of %d", c.Skewed, c.Nodes)
	case c.Extends < 0 || c.Extends > 255:
		return fmt.Errorf("protomodel: %d extensions, want 0..255", c.Extends)
	case !c.Reacquire && (c.Variant == ReacquireOverwrites || c.Variant == ReacquireCountsRefusal || c.Variant == ReacquireUnreleased):
		return fmt.Errorf("protomodel: variant %q needs Reacquire", c.Variant)
	}
	return nil
}

//go:norace
func (c Config) checksExclusion() bool { return c.Timing == ExactClocks || c.CheckExclusion }

//go:norace
func (c Config) String() string {
	s := fmt.Sprintf("N=%d %dx%d", c.Nodes, c.Clients, c.Attempts)
	for _, b := range []struct {
		name string
		n    int
	}{{"crash", c.Crashes}, {"expiry", c.Expiries}, {"reask", c.Reasks}, {"timeout", c.Timeouts}, {"giveup", c.GiveUps}, {"retry", c.Retries}, {"lease", c.Leases}, {"extend", c.Extends}} {
		if b.n > 0 {
			s += fmt.Sprintf(" %s=%d", b.name, b.n)
		}
	}
	if c.Reacquire {
		s += " reacquire"
	}
	if c.Rolling {
		s += " rolling"
	}
	if !c.PromptReplies {
		s += " network"
	}
	if c.Timing == AnyTiming {
		s += " any-timing"
	}
	if c.Fairness != KeptQuorum {
		s += " " + fairnessNames[c.Fairness]
	}
	if c.Init != nil {
		s += fmt.Sprintf(" init=%v", c.Init)
	}
	if c.Variant != Correct {
		s += " [" + c.Variant.String() + "]"
	}
	if len(c.Unchecked) > 0 {
		s += fmt.Sprintf(" unchecked=%q", c.Unchecked)
	}
	return s
}
