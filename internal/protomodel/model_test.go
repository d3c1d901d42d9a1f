package protomodel

import (
	"flag"
	"testing"
)

var large = flag.Bool("model.large", false, "also explore the larger bounds (tens of minutes)")

// The bounds `go test` explores. Each is exhaustive: every interleaving of
// every step the bound allows, states de-duplicated up to renaming nodes
// and clients. docs/protocol.md quotes the figures these runs print.
var (
	// Two clients that each acquire twice (acquire, hold, unlock), on three
	// nodes. Replies reach the client at once; a reply that is slow is a
	// timeout and a late reply (see n3Network for the finer network).
	n3 = Config{Nodes: 3, Clients: 2, Attempts: 2, PromptReplies: true}
	// Every message on its own: a reply travels after the node ran the
	// call, and the client may decide before it arrives.
	n3Network = Config{Nodes: 3, Clients: 2, Attempts: 2}
	// A node crashes once and restarts, with its data or, when the
	// assumption allows, without (amnesia).
	n3Crash = with(n3, func(c *Config) { c.Crashes = 1 })
	// A validity runs out: that hold's keys may expire.
	n3Expiry = with(n3, func(c *Config) { c.Expiries = 1 })
	// No timing assumption at all: any key may expire at any moment.
	n3AnyTiming = with(n3, func(c *Config) { c.Timing = AnyTiming })
	// Three contenders: a split vote and its re-ask; then a timeout and a
	// give-up (ctx cancelled).
	n3Split   = Config{Nodes: 3, Clients: 3, Attempts: 1, Reasks: 1, PromptReplies: true}
	n3Timeout = Config{Nodes: 3, Clients: 3, Attempts: 1, Timeouts: 1, PromptReplies: true}
	n3GiveUp  = Config{Nodes: 3, Clients: 3, Attempts: 1, GiveUps: 1, PromptReplies: true}
	// Five nodes: every message on its own; a crash; a validity running out.
	n5Network = Config{Nodes: 5, Clients: 2, Attempts: 1}
	n5Crash   = Config{Nodes: 5, Clients: 2, Attempts: 1, Crashes: 1, PromptReplies: true}
	n5Expiry  = Config{Nodes: 5, Clients: 2, Attempts: 1, Expiries: 1, PromptReplies: true}
	// The waiting set (every bound has it; in the others each try begins a
	// new wait): a Lock that tries again after a refusal, with the wait
	// start it registered; then also a lease that runs out.
	n3Retry      = with(n3, func(c *Config) { c.Retries = 1 })
	n3RetryLease = with(n3Retry, func(c *Config) { c.Leases = 1 })
	// Extend: a hold extends once in a run, without the option and with it
	// (WithReacquireOnExtend: the extension re-creates a vanished key).
	n3Extend    = with(n3, func(c *Config) { c.Extends = 1 })
	n3Reacquire = with(n3Extend, func(c *Config) { c.Reacquire = true })
	// With the option, keys vanish: a validity runs out among three
	// contenders; two validities run out (the hold's, then the
	// extension's own); a node crashes and restarts empty (assumption A)
	// while a validity may run out.
	n3ReacquireExpiry  = Config{Nodes: 3, Clients: 3, Attempts: 1, Expiries: 1, Extends: 1, Reacquire: true, PromptReplies: true}
	n3ReacquireExpiry2 = Config{Nodes: 3, Clients: 2, Attempts: 1, Expiries: 2, Extends: 1, Reacquire: true, PromptReplies: true}
	n3ReacquireCrash   = Config{Nodes: 3, Clients: 2, Attempts: 1, Crashes: 1, Expiries: 1, Extends: 1, Reacquire: true, PromptReplies: true}
	// Rolling restarts: one node down at a time, back empty even while a
	// hold within its validity has its key there, if that hold keeps its
	// current key on a quorum of the others and is not extending.
	n3Rolling = Config{Nodes: 3, Clients: 2, Attempts: 1, Crashes: 2, Extends: 2, Reacquire: true, Rolling: true, PromptReplies: true}
	// A deadline and an extension: where a late grant is stepped back while
	// its attempt decides, that release lands after an extension counted its
	// node (LateGrantSteppedBack). In the large bounds, with the rule as it
	// is (a few million states).
	n3TimeoutExtend = with(n3Timeout, func(c *Config) { c.Extends = 1 })
)

var defaultBounds = []Config{n3, n3Network, n3Crash, n3Expiry, n3AnyTiming, n3Split, n3Timeout, n3GiveUp, n5Network, n5Crash, n5Expiry, n3Retry, n3RetryLease,
	n3Extend, n3Reacquire, n3ReacquireExpiry, n3ReacquireExpiry2, n3ReacquireCrash, n3Rolling}

// largeBounds: go test -run Model -model.large ./internal/protomodel
var largeBounds = []Config{
	n3TimeoutExtend,
	with(n3TimeoutExtend, func(c *Config) { c.Reacquire = true }),
	{Nodes: 5, Clients: 2, Attempts: 2, PromptReplies: true},
	{Nodes: 5, Clients: 3, Attempts: 1, PromptReplies: true},
	{Nodes: 3, Clients: 2, Attempts: 2, Crashes: 1, Expiries: 1, PromptReplies: true},
	{Nodes: 3, Clients: 2, Attempts: 2, Timing: AnyTiming, Crashes: 1, PromptReplies: true},
	{Nodes: 3, Clients: 2, Attempts: 2, Reasks: 1, Timeouts: 1, GiveUps: 1, PromptReplies: true},
	{Nodes: 3, Clients: 2, Attempts: 2, Expiries: 1},
	{Nodes: 3, Clients: 2, Attempts: 3, Retries: 2, PromptReplies: true},
	{Nodes: 3, Clients: 2, Attempts: 2, Retries: 1},
	{Nodes: 3, Clients: 2, Attempts: 2, Expiries: 1, Extends: 1, PromptReplies: true},
	{Nodes: 3, Clients: 2, Attempts: 2, Expiries: 1, Extends: 1, Reacquire: true, PromptReplies: true},
	{Nodes: 3, Clients: 2, Attempts: 2, Crashes: 1, Extends: 1, Reacquire: true, PromptReplies: true},
	{Nodes: 3, Clients: 3, Attempts: 1, Crashes: 1, Extends: 1, Reacquire: true, PromptReplies: true},
	{Nodes: 3, Clients: 2, Attempts: 2, Extends: 2, Reacquire: true, PromptReplies: true},
	{Nodes: 3, Clients: 2, Attempts: 2, Extends: 1, Reacquire: true},
	{Nodes: 5, Clients: 2, Attempts: 1, Expiries: 1, Extends: 1, Reacquire: true, PromptReplies: true},
	{Nodes: 5, Clients: 2, Attempts: 1, Crashes: 1, Extends: 1, Reacquire: true, PromptReplies: true},
	with(n3Rolling, func(c *Config) { c.Reacquire = false }),
}

func with(c Config, f func(*Config)) Config {
	f(&c)
	return c
}

func explore(t *testing.T, c Config) *Result {
	t.Helper()
	m, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	r := m.Explore()
	t.Log(r)
	return r
}

// TestModelProtocol: the protocol keeps every property in every state of
// every bound, and each bound lets every acquisition succeed in some run
// (the check is not vacuous).
func TestModelProtocol(t *testing.T) {
	bounds := defaultBounds
	if *large {
		bounds = append(bounds, largeBounds...)
	}
	for _, c := range bounds {
		t.Run(c.String(), func(t *testing.T) {
			t.Parallel() // independent searches: use both cores when free
			r := explore(t, c)
			if r.Violation != nil {
				t.Fatalf("%s violated", r.Violation.Property)
			}
			if r.Holds != c.Clients*c.Attempts {
				t.Errorf("at most %d locks returned in a run, want %d", r.Holds, c.Clients*c.Attempts)
			}
		})
	}
}

// TestModelPlantedBugs: each deviation from the protocol is caught, under
// a bound that the protocol itself passes (TestModelProtocol), with a
// shortest trace (the search is breadth first).
func TestModelPlantedBugs(t *testing.T) {
	for _, tc := range []struct {
		bug   Variant
		bound Config
		want  []Property
	}{
		// Without the ownership check, a raise lands after the key moved to
		// a contender: two concurrent holds share a token. With exact clocks
		// the validity check hides it (the key can only have gone after the
		// validity ran out), so it takes the bound without timing.
		{RaiseWithoutOwnership, n3AnyTiming, []Property{UniqueTokens, FencingOrder}},
		{NoRaise, n3, []Property{UniqueTokens, FencingOrder}},
		{HealLowers, n3, []Property{UniqueTokens, FencingOrder}},
		{AmnesiaUnhealed, n3Crash, []Property{FencingOrder, UniqueTokens}},
		// No raise breaks the fencing order too, not only uniqueness.
		{NoRaise, with(n3AnyTiming, func(c *Config) { c.Unchecked = []Property{UniqueTokens} }), []Property{FencingOrder}},
		// Not one of the token's bugs: shows the grant check can fail too.
		{LateGrantKept, n3, []Property{NoGrantLeftBehind}},
		// A newcomer granted a free key ahead of the head of the set.
		{Barging, n3, []Property{Fairness}},
		// The rule as first proposed: a grant removes the caller's entry,
		// also where its try then fails, so its place moves from node to
		// node while a younger waiter collects the nodes it left. It takes a
		// Lock that tries again with its wait start.
		{GrantRemovesEntry, n3Retry, []Property{Fairness}},
		// With the option: a re-create that overwrites another hold's key,
		// or an extension that counts a node whose re-create failed, lets a
		// hold whose keys had expired extend while another holds.
		{ReacquireOverwrites, n3ReacquireExpiry, []Property{MutualExclusion}},
		{ReacquireCountsRefusal, n3ReacquireExpiry, []Property{MutualExclusion}},
		// An Unlock that leaves out the nodes that refused the acquire
		// leaves a key an extension re-created there.
		{ReacquireUnreleased, n3Reacquire, []Property{NoGrantLeftBehind}},
		// A late grant stepped back while its attempt decides: the attempt
		// wins, extends, and the step back (sent again, or late) deletes a
		// key the extension counted.
		{LateGrantSteppedBack, n3TimeoutExtend, []Property{MutualExclusion}},
	} {
		t.Run(tc.bound.String()+" "+tc.bug.String(), func(t *testing.T) {
			c := tc.bound
			c.Variant = tc.bug
			r := explore(t, c)
			if r.Violation == nil {
				t.Fatalf("not caught")
			}
			if !oneOf(r.Violation.Property, tc.want) {
				t.Fatalf("caught as %s, want one of %v", r.Violation.Property, tc.want)
			}
		})
	}
}

// TestModelAssumptions: drop one assumption and the claim that rests on it
// breaks, with a shortest counterexample; the claims that do not rest on it
// still hold.
func TestModelAssumptions(t *testing.T) {
	skewed := n3Expiry
	skewed.Variant, skewed.Skewed = SkewedNodes, 1
	pause := n3Expiry
	pause.Variant = Pause
	drift := n3AnyTiming
	drift.CheckExclusion = true
	early := n3Crash
	early.Variant = AmnesiaEarly
	rolling := n3Rolling
	rolling.Variant = RollingMidExtension
	for _, tc := range []struct {
		name  string
		bound Config
		want  Property
	}{
		{"one node clock runs fast", skewed, MutualExclusion},
		{"unbounded drift", drift, MutualExclusion},
		{"holder paused past its validity", pause, MutualExclusion},
		{"amnesia while an acquisition is in flight", early, UniqueTokens},
		// An extension counted the node's yes before it restarted empty:
		// its new epoch has a key on one node, the old epoch's keys expire.
		{"rolling restart while an extension decides", rolling, MutualExclusion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := explore(t, tc.bound)
			if r.Violation == nil || r.Violation.Property != tc.want {
				t.Fatalf("want a %s violation", tc.want)
			}
		})
	}
}

func oneOf(p Property, ps []Property) bool {
	for _, q := range ps {
		if p == q {
			return true
		}
	}
	return false
}

// TestModelOwnershipUnderExactClocks: with exact clocks the raise's
// ownership check is redundant (a key can only have gone after the
// validity ran out, and then the attempt fails): every exact-clock bound
// passes with the check left out. It matters without the timing assumption
// (TestModelPlantedBugs). Behind -model.large: it repeats big bounds.
func TestModelOwnershipUnderExactClocks(t *testing.T) {
	if !*large {
		t.Skip("-model.large")
	}
	for _, c := range []Config{n3Network, n3Crash, n3Expiry, n3Split, n3Timeout, n3GiveUp, n5Crash, n5Expiry} {
		c.Variant = RaiseWithoutOwnership
		t.Run(c.String(), func(t *testing.T) {
			t.Parallel()
			if r := explore(t, c); r.Violation != nil {
				t.Fatalf("%s violated", r.Violation.Property)
			}
		})
	}
}

// TestModelFairnessForms: the claim (Claim 6, checked in every bound) lets
// only a fault excuse a node of the quorum that held the older waiter's
// entry when the younger began. Without faults that is the weakest
// hypothesis, "a quorum held it when the younger began"; "some quorum at
// every moment" is not enough once a lease can run out (docs/protocol.md,
// Claim 6, with the trace); and the first rule (a grant removes the entry)
// keeps only the form that needs one quorum without a gap.
func TestModelFairnessForms(t *testing.T) {
	for _, tc := range []struct {
		name  string
		bound Config
		fair  bool
	}{
		{"a quorum when the younger began", with(n3Retry, func(c *Config) { c.Fairness = OnceQuorum }), true},
		{"a quorum at every moment, a lease runs out", with(n3RetryLease, func(c *Config) { c.Fairness = AnyQuorum }), false},
		{"one quorum without a gap, grant removes the entry", with(n3Retry, func(c *Config) {
			c.Fairness, c.Variant = FixedQuorum, GrantRemovesEntry
		}), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := explore(t, tc.bound)
			switch {
			case tc.fair && r.Violation != nil:
				t.Fatalf("%s violated", r.Violation.Property)
			case !tc.fair && (r.Violation == nil || r.Violation.Property != Fairness):
				t.Fatalf("want a %s violation", Fairness)
			}
		})
	}
}
