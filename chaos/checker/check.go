package checker

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/history"
)

// Verdict is the outcome of a check.
type Verdict string

// The verdicts.
const (
	VerdictOK       Verdict = "ok"       // no violation that the faults do not explain
	VerdictViolated Verdict = "violated" // at least one violation that no assumption-breaking fault explains
	VerdictUnknown  Verdict = "unknown"  // empty, too short, incomplete or unreadable: nothing can be claimed
)

// Property is a property the checker verifies.
type Property string

// The properties: six safety properties, three of liveness (see Liveness,
// Starvation and Handover), one of order, judged only on request (see
// CheckOptions.OrderMargin), and three node guarantees, judged from the
// probes a history has (see nodes.go).
const (
	MutualExclusion     Property = "mutual_exclusion"
	FencingOrder        Property = "fencing_order"
	DuplicateTokens     Property = "duplicate_tokens"
	StaleWritesAccepted Property = "stale_writes_accepted"
	LostWrites          Property = "lost_writes"
	// ResurrectedHold is an extension that succeeded after another hold of
	// the key was acquired past the extended hold's validity (see
	// resurrectedHolds): a lock that re-creates vanished keys.
	ResurrectedHold    Property = "resurrected_hold"
	LivenessStall      Property = "liveness"   // a key free and wanted, with a quorum up, for too long
	LivenessStarvation Property = "starvation" // a client that waited too long for a key others kept getting
	SlowHandover       Property = "handover"   // a key handed on from a release to its waiters too slowly
	Order              Property = "order"      // a client overtaken by one that began waiting after it
	// The node guarantees, judged from probes of the nodes (see nodes.go).
	LeftoverGrant     Property = "leftover_grant"      // a node still held what a settled call left there, past the release allowance
	UntilBeyondQuorum Property = "until_beyond_quorum" // Until later than what a quorum of nodes still held
	UnlockResult      Property = "unlock_result"       // Unlock said released while a quorum held, or lost while a quorum held
)

// NoFault is the ByFault key of violations with no fault active around them.
const NoFault fault.Kind = "none"

// Counts holds a number per property.
type Counts struct {
	MutualExclusion     int `json:"mutual_exclusion"`
	FencingOrder        int `json:"fencing_order"`
	DuplicateTokens     int `json:"duplicate_tokens"`
	StaleWritesAccepted int `json:"stale_writes_accepted"`
	LostWrites          int `json:"lost_writes"`
	ResurrectedHolds    int `json:"resurrected_hold"`
	Liveness            int `json:"liveness"`
	Starvation          int `json:"starvation"`
	Handover            int `json:"handover"`
	Order               int `json:"order"`
	LeftoverGrant       int `json:"leftover_grant"`
	UntilBeyondQuorum   int `json:"until_beyond_quorum"`
	UnlockResult        int `json:"unlock_result"`
}

// Total is the sum over all properties.
func (c Counts) Total() int {
	return c.MutualExclusion + c.FencingOrder + c.DuplicateTokens + c.StaleWritesAccepted + c.LostWrites +
		c.ResurrectedHolds + c.Liveness + c.Starvation + c.Handover + c.Order +
		c.LeftoverGrant + c.UntilBeyondQuorum + c.UnlockResult
}

// Get returns the count of p.
func (c Counts) Get(p Property) int { return *c.field(p) }

func (c *Counts) field(p Property) *int {
	switch p {
	case MutualExclusion:
		return &c.MutualExclusion
	case FencingOrder:
		return &c.FencingOrder
	case DuplicateTokens:
		return &c.DuplicateTokens
	case StaleWritesAccepted:
		return &c.StaleWritesAccepted
	case LostWrites:
		return &c.LostWrites
	case ResurrectedHold:
		return &c.ResurrectedHolds
	case LivenessStall:
		return &c.Liveness
	case LivenessStarvation:
		return &c.Starvation
	case SlowHandover:
		return &c.Handover
	case Order:
		return &c.Order
	case LeftoverGrant:
		return &c.LeftoverGrant
	case UntilBeyondQuorum:
		return &c.UntilBeyondQuorum
	case UnlockResult:
		return &c.UnlockResult
	}
	panic("history: unknown property " + string(p))
}

// Properties lists the properties in report order.
func Properties() []Property {
	return []Property{MutualExclusion, FencingOrder, DuplicateTokens, StaleWritesAccepted, LostWrites, ResurrectedHold, LivenessStall, LivenessStarvation, SlowHandover, Order,
		LeftoverGrant, UntilBeyondQuorum, UnlockResult}
}

// Violation is one breach of a property.
type Violation struct {
	Property Property
	Key      string // the lock key, or the store resource for store properties
	Ops      []int  // IDs of the ops involved (the earlier one first)
	Clients  []int  // clients of those ops
	// Start and End delimit the violation itself: the overlap of two holds;
	// from the earlier acquire's return to the later one's (fencing order,
	// duplicates); the stale write; from a lost write to the end of the run.
	Start, End time.Duration
	// Since is the earliest invocation among the ops involved. Faults active
	// in [Since, End], or ended less than the aftermath before Since on a
	// key they could reach, are blamed; client faults only when they hit a
	// client involved; node faults, when the nodes of two holds are known,
	// only within [Since, End] on those nodes (see blamer).
	Since time.Duration
	// Nodes, when not nil, are the nodes the violation is about: only
	// node faults on them are blamed (see blamer.window).
	Nodes    []int
	Faults   []fault.Kind // kinds blamed, sorted; empty when none
	Expected bool         // a blamed kind breaks an assumption this property rests on
	Detail   string
}

// CheckOptions tune Check. The zero value is valid: every zero field means
// its documented default.
type CheckOptions struct {
	// Expected lists, per property, the fault kinds that break the
	// assumptions the property rests on; a violation blamed on one of them is
	// expected and does not make the verdict violated. Nil means
	// DefaultExpected(); storage properties are never expected by default,
	// since fencing must keep the store correct under every fault.
	Expected map[Property][]fault.Kind
	// Aftermath is how long after it ended a fault is still blamed, on the
	// lock keys it could reach: those held or being acquired while it was
	// active, by the client it hit or (when the history says which nodes
	// granted a hold) on the node it hit. Default: each such key's lease,
	// the longest validity of its acquires. Other keys get none.
	Aftermath time.Duration
	// StallThreshold is the longest stall with a quorum up that liveness
	// allows any key (see Liveness); default derived from the history, per
	// key: twice the key's longest lease plus four times the p99 release
	// latency, and no threshold (stalls measured, not judged) when the
	// history has no validity ends.
	StallThreshold time.Duration
	// StarvationThreshold is the longest a client may wait for a key that
	// others keep getting (see Starvation); default derived from the
	// history, per key: the key's stall threshold plus its longest hold, or
	// ten times the key's mean wait per grant if that is longer, and no
	// threshold (waits measured, not judged) when the stall threshold is
	// none.
	StarvationThreshold time.Duration
	// HandoverThreshold is the longest median time a key may take to pass
	// from a release to the next acquire while clients wait for it (see
	// Handover); default derived from the history: five times the median
	// latency of its successful releases, and none (gaps measured, not
	// judged) with fewer than 16 handovers to take the median of.
	HandoverThreshold time.Duration
	// OrderMargin turns on the order property (see order): a client whose
	// Lock began more than OrderMargin after another's, and got the key
	// while the other still waited, overtook it. It must cover how long a
	// refused first attempt takes to enter its place on a quorum of nodes.
	// Default 0: not judged, since most locks promise no order among
	// waiters.
	OrderMargin time.Duration
	// ReleaseAllowance is how long after a failed acquire or an Unlock
	// returned a node may still hold what the call left there before it is
	// a leftover grant (see LeftoverGrant), before it is stretched by the
	// p99 latency of the history's releases (how much the machine's load
	// held releases back in this run). Default 0: not judged, since it
	// rests on the lock's node timeout, which a history does not carry; the
	// chaos harness derives it from its own (Config.CheckOptions).
	ReleaseAllowance time.Duration
	// MinAcquisitions is how many successful acquires a history needs for a
	// verdict other than unknown; default 2.
	MinAcquisitions int
	// HarnessTokens says that the lock gave no fencing token, and that the
	// history's tokens are the harness's own, numbered in the order the
	// acquisitions returned (its writes went to the store unfenced): the
	// properties of the lock's tokens (TokenProperties) are then not
	// applicable, and the store's, judged on those numbers, count the stale
	// writes that reached the store. Default false: the lock's tokens.
	HarnessTokens bool
}

// TokenProperties are the properties of a lock's fencing tokens: not
// applicable to a lock that gives none (CheckOptions.HarnessTokens).
func TokenProperties() []Property { return []Property{FencingOrder, DuplicateTokens} }

// DefaultExpected returns the assumption-breaking faults of each property:
// mutual exclusion rests on clients acting within their validity, on clocks
// that run at about the same rate and on nodes keeping their keys (every
// kind of fault.AssumptionBreaking); token order and uniqueness rest only on
// nodes keeping their fence counters (every kind that LosesData, the delayed
// restart included); a resurrected hold rests on no assumption at all (see
// resurrectedHolds), and is excused, to be safe, under the same kinds.
// The node guarantees are excused only by faults on the nodes a violation
// is about (nodeExpected): a leftover grant by any fault of its node, which
// may hold the release back, or a slow clock of its client; Until beyond a
// quorum by a node that lost its data or whose clock jumped; an Unlock's
// result by those, and by a node clock's allowed drift, which makes its
// PTTL overstate how long the key stays.
func DefaultExpected() map[Property][]fault.Kind {
	var losers []fault.Kind
	for _, k := range fault.Kinds() {
		if k.LosesData() {
			losers = append(losers, k)
		}
	}
	var clientBreaking []fault.Kind
	for _, k := range fault.AssumptionBreaking() {
		if k.ClientSide() {
			clientBreaking = append(clientBreaking, k)
		}
	}
	return map[Property][]fault.Kind{
		MutualExclusion: fault.AssumptionBreaking(),
		FencingOrder:    losers,
		DuplicateTokens: slices.Clone(losers),
		ResurrectedHold: slices.Clone(losers),
		// A node whose clock runs slow keeps a key past its TTL, a paused
		// holder keeps it to its end: waiters stall, as the fault explains.
		LivenessStall: fault.AssumptionBreaking(),
		// The same faults can leave one waiter behind while others, which
		// happened to ask the nodes that answered, proceed.
		LivenessStarvation: fault.AssumptionBreaking(),
		// Handovers are measured with every node up and prompt (see
		// Handover): of the faults left, those of a client that break an
		// assumption slow it down (a paused client, a slow clock); a node's
		// clock jump does not delay an announced release.
		SlowHandover: clientBreaking,
		// Order rests on every node answering the waiter's tries in time
		// and keeping its place (a node down, slow, restarted empty, or
		// cut off from the waiter's announcements may let a younger caller
		// in), and on the waiters' clocks and pace: any node fault, and
		// any assumption-breaking one.
		Order: orderBreaking(),
		// The node guarantees: see nodeExpected.
		LeftoverGrant:     nodeExpected(LeftoverGrant),
		UntilBeyondQuorum: nodeExpected(UntilBeyondQuorum),
		UnlockResult:      nodeExpected(UnlockResult),
	}
}

// Result is what Check found.
type Result struct {
	Verdict Verdict
	Reason  string // why the verdict, in a few words

	// NotApplicable lists the properties not judged, since the lock lacks
	// what they are about (TokenProperties, under HarnessTokens): their
	// counts are zero, and mean nothing.
	NotApplicable []Property

	Violations []Violation           // every violation, by property then time
	Found      Counts                // all violations
	Expected   Counts                // those blamed on assumption-breaking faults
	ByFault    map[fault.Kind]Counts // per kind blamed (NoFault when none); a violation counts under each of its kinds

	// StoreCorrect is true when no stale write was accepted and no
	// acknowledged write was lost (the latter only checked when StoreChecked).
	StoreCorrect        bool
	StoreChecked        bool // the history has the final store contents
	StaleWritesRejected int
	Writes              int // writes accepted

	Acquisitions    int // successful acquires
	AcquireFailures int
	Pending         int // client ops that never completed

	Liveness   Liveness
	Starvation Starvation
	Handover   Handover
	Spans      []Span      // the holds, for timelines
	Faults     []FaultSpan // the faults that were injected (and undone)
	// FailedFaults are the faults that could not be injected or undone
	// (FaultSpan.Err): the run was not the one planned, so the verdict is
	// unknown unless a violation shows anyway. They are blamed like the
	// others, since they may have half happened.
	FailedFaults []FaultSpan
}

// Applicable reports whether p was judged (see NotApplicable).
func (r Result) Applicable(p Property) bool { return !slices.Contains(r.NotApplicable, p) }

// Unexpected returns the counts of violations not explained by faults.
func (r Result) Unexpected() Counts {
	var c Counts
	for _, p := range Properties() {
		*c.field(p) = r.Found.Get(p) - r.Expected.Get(p)
	}
	return c
}

// Check checks h. It does not modify h.
func Check(h history.History, opts CheckOptions) Result {
	opts = opts.withDefaults()
	res := Result{Verdict: VerdictUnknown, ByFault: map[fault.Kind]Counts{}}
	spans, err := Spans(h)
	if err != nil {
		res.Reason = "unreadable history: " + err.Error()
		return res
	}
	res.Spans = spans
	all := Faults(h)
	for _, f := range all {
		if f.Err != "" {
			res.FailedFaults = append(res.FailedFaults, f)
		} else {
			res.Faults = append(res.Faults, f)
		}
	}
	for _, op := range h.Ops {
		switch {
		case op.Kind == history.KindFault || op.Kind == history.KindLost:
		case op.Outcome == history.Pending:
			res.Pending++
		case op.Kind == history.KindAcquire && op.Outcome == history.OK:
			res.Acquisitions++
		case op.Kind == history.KindAcquire:
			res.AcquireFailures++
		case op.Kind == history.KindWrite && op.Outcome == history.OK:
			res.Writes++
		case op.Kind == history.KindWrite && op.Outcome == history.Rejected:
			res.StaleWritesRejected++
		}
	}

	vs := mutualExclusion(spans, h.ClockError)
	if opts.HarnessTokens {
		res.NotApplicable = TokenProperties()
	} else {
		vs = append(vs, fencingOrder(h)...)
		vs = append(vs, duplicateTokens(h)...)
	}
	vs = append(vs, resurrectedHolds(h)...)
	vs = append(vs, staleWrites(h)...)
	lost, checked := lostWrites(h)
	vs = append(vs, lost...)
	res.StoreChecked = checked
	stallAt := newStallThresholds(h, opts.StallThreshold)
	var stalled []Violation
	res.Liveness, stalled = liveness(h, spans, all, opts, stallAt)
	vs = append(vs, stalled...)
	var starved []Violation
	res.Starvation, starved = starvation(h, spans, all, opts, stallAt)
	vs = append(vs, starved...)
	var slow []Violation
	res.Handover, slow = handover(h, all, opts)
	vs = append(vs, slow...)
	if opts.OrderMargin > 0 {
		vs = append(vs, order(h, spans, opts.OrderMargin)...)
	}
	// A release the machine's load held back is held back as the run's
	// releases were: the allowance stretches by their p99 latency.
	leftoverAllowance := opts.ReleaseAllowance
	if leftoverAllowance > 0 {
		leftoverAllowance += releaseP99(h)
	}
	vs = append(vs, nodeGuarantees(h, leftoverAllowance)...)
	b := newBlamer(h, spans, all, opts.Aftermath, h.ClockError)
	b.blame(vs, opts.Expected)
	if l := &res.Liveness; l.LongestStall > 0 {
		l.Faults = b.window(l.Key, l.Start, l.End, nil, nil, true)
	}
	if s := &res.Starvation; s.Wait > 0 {
		s.Faults = b.window(s.Key, s.Start, s.End, []int{s.Client}, nil, true)
	}
	for _, v := range vs {
		*res.Found.field(v.Property)++
		if v.Expected {
			*res.Expected.field(v.Property)++
		}
		kinds := v.Faults
		if len(kinds) == 0 {
			kinds = []fault.Kind{NoFault}
		}
		for _, k := range kinds {
			c := res.ByFault[k]
			*c.field(v.Property)++
			res.ByFault[k] = c
		}
	}
	res.Violations = vs
	res.StoreCorrect = res.Found.StaleWritesAccepted == 0 && res.Found.LostWrites == 0
	res.Verdict, res.Reason = verdict(res, len(h.Ops), opts.MinAcquisitions, h.ClockError, b.longest)
	return res
}

// verdict judges res; clockErr is the history's clock error, and longest
// its longest lease.
func verdict(res Result, ops, minAcq int, clockErr, longest time.Duration) (Verdict, string) {
	if u := res.Unexpected(); u.Total() > 0 {
		return VerdictViolated, fmt.Sprintf("%d violations not explained by assumption-breaking faults (%s)",
			u.Total(), describe(u))
	}
	switch {
	case ops == 0:
		return VerdictUnknown, "empty history"
	case len(res.FailedFaults) > 0:
		f := res.FailedFaults[0]
		return VerdictUnknown, fmt.Sprintf("%d faults could not be injected or undone (first: %s on %s at %v: %s)",
			len(res.FailedFaults), f.Kind, f.Target(), f.Start.Round(time.Millisecond), f.Err)
	case res.Pending > 0:
		return VerdictUnknown, fmt.Sprintf("%d client operations never completed", res.Pending)
	case res.Acquisitions < minAcq:
		return VerdictUnknown, fmt.Sprintf("only %d successful acquisitions (need %d)", res.Acquisitions, minAcq)
	case longest > 0 && clockErr >= longest:
		// Two holds that overlap by less than the clock error pass: with
		// an error as long as the longest hold, any two may overlap whole.
		return VerdictUnknown, fmt.Sprintf("clock error %v is as long as the longest validity (%v): no overlap can be told",
			clockErr, longest)
	case res.Expected.Total() > 0:
		return VerdictOK, fmt.Sprintf("%d expected violations under assumption-breaking faults (%s)",
			res.Expected.Total(), describe(res.Expected))
	}
	return VerdictOK, "no violations"
}

// describe lists the non-zero counts of c, e.g. "mutual_exclusion 2".
func describe(c Counts) string {
	var parts []string
	for _, p := range Properties() {
		if n := c.Get(p); n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", p, n))
		}
	}
	return strings.Join(parts, ", ")
}

func (o CheckOptions) withDefaults() CheckOptions {
	if o.Expected == nil {
		o.Expected = DefaultExpected()
	}
	if o.MinAcquisitions == 0 {
		o.MinAcquisitions = 2
	}
	return o
}
