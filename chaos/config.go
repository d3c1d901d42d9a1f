package chaos

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/fencedlock/fencedlock/chaos/backend"
	"github.com/fencedlock/fencedlock/chaos/checker"
	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/history"
	"github.com/fencedlock/fencedlock/chaos/internal/faketime"
	"github.com/fencedlock/fencedlock/chaos/schedule"
)

// Config describes a chaos run. A zero Config is valid: 5 process nodes, 8
// clients, 20s, the faults the algorithm tolerates.
type Config struct {
	Nodes int // lock nodes; default 5
	// Lock is the lock the workload drives, one of Locks(); default
	// LockFencedlock. The workload's fencedlock-only features (probes of
	// the nodes, lanes, client processes, client-clock-skew) need a
	// fencedlock variant; a lock with no fencing token writes to the store
	// unfenced (see store).
	Lock    string
	Clients int // workload clients, each its own redlock.Client; default 8
	// Lanes is how many goroutines of each client loop holds on its one
	// redlock.Client, so that the Client's local wait queue and the hand-off
	// of its place at Unlock run; default 3 for the hunt (see lanes), 1
	// otherwise. Lanes of a client share its id in the history: a client
	// is a process.
	Lanes    int
	Duration time.Duration // how long the workload runs; default 20s
	// Faults to inject: any kinds of package fault. Nil means
	// DefaultFaults() (HuntFaults() for the hunt); an empty non-nil list, no
	// faults at all.
	Faults []fault.Kind
	Seed   uint64 // seeds the fault schedule; default 1
	// Backend is "process" (local redis-server processes, the default) or
	// "docker" (containers; see package backend/docker).
	Backend string
	// Replicas makes each node a primary with an asynchronous replica,
	// under one Sentinel whose timing is derived from TTL (see
	// process.WithReplicas, docker.WithReplicas). The fault kinds that
	// NeedsReplicas (failover) require it. Default false: plain nodes.
	Replicas bool
	TTL      time.Duration // lock TTL; default 1s
	// NodeTimeout bounds each node call of the workload's clients; default 100ms.
	NodeTimeout time.Duration
	// Strict counts every violation as unexpected, even under faults that
	// break an assumption of the lock (checker.DefaultExpected otherwise).
	Strict bool
	// StopOnViolation ends the run early, ten TTLs after the first safety
	// violation that no fault explains (the history is checked as it grows;
	// the wait lets the faults in progress end and be recorded, since one of
	// them may explain it); the run is then checked and reported as usual,
	// up to that point. Default false: the run lasts Duration.
	StopOnViolation bool
	// Progress, if set, gets a live progress line every second.
	Progress io.Writer
	// Profile selects the fault schedule and the workload: "" is a random
	// schedule drawn from Faults and the plain workload; ProfileHunt is the
	// hunt (see ProfileHunt); ProfileRolling, rolling restarts under one
	// long hold (see ProfileRolling).
	Profile string
	// ClientProcs runs each workload client as an OS process of its own,
	// started by running this program's executable again, which must call
	// ClientMain first thing (the fencedlock CLI does). The processes run on
	// this machine and talk to the nodes' loopback addresses on either
	// backend. client-pause is then a real SIGSTOP of the process in its
	// critical section, and a process that dies leaves the ops it had in
	// flight failed in the history. Default false: the clients are
	// goroutines, which is faster.
	ClientProcs bool

	// For tests, called from the goroutine that reads the client process:
	// onProcOp with each op it reports (invoked, then completed), on Run's
	// history clock; onProcStop once it is stopped (client-pause), with its
	// hold's validity end and the time, on that clock.
	onProcOp   func(client, pid int, op history.Op)
	onProcStop func(client, pid int, validUntil, now time.Duration)
}

// ProfileHunt is the profile that builds, on purpose, the states where lock
// protocols break (the episodes of schedule.NewHuntPlan: overlapping
// majorities, amnesia rotation, lost replies, restarts under long holds,
// clock jumps, late heals, latency bursts and a clock drift within the
// allowance on a majority), with a workload that exercises what the plain
// one leaves alone: three lanes per client on its one redlock.Client (a
// local wait queue, and hand-offs of the Client's place at Unlock); three
// keys, two of them sharing a fence counter; holds that run to their
// validity, outlive it and then unlock or extend (once another hold came);
// bursts of brief holds, extensions sent at the last moment and extensions
// to a shorter TTL (shapes.go); explicit and automatic extension across
// restarts; late writes by former holders, stale
// by as little as one token; and a node cut off right after it granted a
// hold whose token a minority of counters carried, before the lagging
// counter is healed. Its Faults default to HuntFaults; it needs 3 nodes or
// more, and libfaketime for the clock jumps and drift.
const ProfileHunt = "hunt"

// ProfileRolling is the rolling restart of nodes without persistence, as
// docs/protocol.md's operator rule for redlock.WithReacquireOnExtend has
// it (section 2, "Extensions that re-create"): the nodes restart without
// their data one at a time, in turn (schedule.NewRollingPlan), each
// rollingSpacing after the one before answered again. Client 0 takes one
// auto-extended hold at the start and keeps it for the whole run, writing
// with its token now and then, and recording each extension it sees with
// the nodes it re-created; the other clients contend for the same key with
// brief holds. With fencedlock-reacquire the hold survives; with fencedlock
// it is lost once a quorum of nodes has restarted. Its Faults are
// restart-without-data alone (RollingFaults); it needs 3 nodes or more and
// a fencedlock variant.
const ProfileRolling = "rolling"

// RollingFaults returns the fault kinds of the rolling profile.
func RollingFaults() []fault.Kind { return []fault.Kind{fault.RestartWithoutData} }

// rollingSpacing is the time between a node of the rolling profile
// answering again and the next node's restart, from the operator rule of
// docs/protocol.md: one TTL for the holds to re-create their keys on the
// node (a hold still within validity a TTL later has been extended since),
// plus the watchdog's extension period (a third of the TTL, see
// redlock.AutoExtend), since the first extension after the node came back
// may find it taken for a moment by a contender's grant and leave the
// re-create to the next, plus a node timeout for that extension to be
// answered.
func (c Config) rollingSpacing() time.Duration { return c.TTL + c.TTL/3 + c.NodeTimeout }

// DefaultFaults returns the faults of a run with no profile and no Faults:
// the tolerated kinds (those only the hunt arms, see huntOnly, left out).
func DefaultFaults() []fault.Kind {
	return slices.DeleteFunc(fault.Tolerated(), huntOnly)
}

// huntOnly reports whether only the hunt's episodes inject k: the hunt's
// schedule does and a random one does not (the heal nemeses act on the
// workload's own connections, and a clock drift within the allowance shows
// something only with the holds the hunt's workload keeps to their
// validity).
func huntOnly(k fault.Kind) bool { return k.Hunted() && !k.Scheduled() }

// HuntFaults returns the fault kinds of the hunt profile: the node faults
// its schedule injects and the client behaviours that break an assumption.
func HuntFaults() []fault.Kind { return append(schedule.HuntKinds(), fault.LateWrite) }

// FaketimeEnv names the environment variable that gives the path of
// libfaketime.so.1, which clock-skew faults on the process backend preload
// into redis-server. Unset: found where Debian and a source install put it.
// (The docker backend uses the libfaketime inside its image.)
const FaketimeEnv = "FENCEDLOCK_LIBFAKETIME"

// ErrConfig is wrapped by the errors of a bad Config.
var ErrConfig = errors.New("chaos: bad configuration")

func (c Config) withDefaults() (Config, error) {
	if c.Nodes == 0 {
		c.Nodes = 5
	}
	if c.Clients == 0 {
		c.Clients = 8
	}
	if c.Duration == 0 {
		c.Duration = 20 * time.Second
	}
	if c.Faults == nil {
		c.Faults = DefaultFaults()
		switch c.Profile {
		case ProfileHunt:
			c.Faults = HuntFaults()
		case ProfileRolling:
			c.Faults = RollingFaults()
		}
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.Lock == "" {
		c.Lock = LockFencedlock
	}
	spec, err := lockSpecOf(c.Lock)
	if err != nil {
		return c, err
	}
	if c.Lanes == 0 {
		c.Lanes = 1
		if c.Profile == ProfileHunt && spec.fencedlock {
			c.Lanes = huntLanes
		}
	}
	if c.Backend == "" {
		c.Backend = "process"
	}
	if c.TTL == 0 {
		c.TTL = time.Second
	}
	if c.NodeTimeout == 0 {
		c.NodeTimeout = 100 * time.Millisecond
	}
	switch {
	case c.Nodes < 1 || c.Nodes > 15:
		return c, fmt.Errorf("%w: %d nodes (want 1 to 15)", ErrConfig, c.Nodes)
	case c.Clients < 1 || c.Clients > 256:
		return c, fmt.Errorf("%w: %d clients (want 1 to 256)", ErrConfig, c.Clients)
	case c.Lanes < 1 || c.Lanes > 16:
		return c, fmt.Errorf("%w: %d lanes (want 1 to 16)", ErrConfig, c.Lanes)
	case c.Lanes > 1 && c.ClientProcs:
		return c, fmt.Errorf("%w: client processes run one lane each", ErrConfig)
	case c.Duration < 100*time.Millisecond:
		return c, fmt.Errorf("%w: duration %v (want at least 100ms)", ErrConfig, c.Duration)
	case c.TTL < 50*time.Millisecond:
		return c, fmt.Errorf("%w: ttl %v (want at least 50ms)", ErrConfig, c.TTL)
	case c.NodeTimeout <= 0 || c.NodeTimeout >= c.TTL/2:
		return c, fmt.Errorf("%w: node timeout %v (want below half the ttl %v)", ErrConfig, c.NodeTimeout, c.TTL)
	case c.Backend != "process" && c.Backend != "docker":
		return c, fmt.Errorf("%w: backend %q (want process or docker)", ErrConfig, c.Backend)
	case c.Profile != "" && c.Profile != ProfileHunt && c.Profile != ProfileRolling:
		return c, fmt.Errorf("%w: profile %q (want %q, %q or none)", ErrConfig, c.Profile, ProfileHunt, ProfileRolling)
	case c.Profile == ProfileHunt && c.Nodes < 3:
		return c, fmt.Errorf("%w: the hunt needs at least 3 nodes, not %d", ErrConfig, c.Nodes)
	case c.rolling() && c.Nodes < 3:
		return c, fmt.Errorf("%w: the rolling restarts need at least 3 nodes, not %d", ErrConfig, c.Nodes)
	case c.rolling() && !spec.fencedlock:
		return c, fmt.Errorf("%w: the rolling restarts drive a fencedlock variant, not %s", ErrConfig, c.Lock)
	case c.rolling() && !slices.Equal(c.Faults, RollingFaults()):
		return c, fmt.Errorf("%w: the rolling restarts inject %s alone, not %s", ErrConfig, fault.Join(RollingFaults()), fault.Join(c.Faults))
	case c.rolling() && c.Lanes > 1:
		return c, fmt.Errorf("%w: the rolling restarts run one lane per client (client 0's is the long hold)", ErrConfig)
	case c.rolling() && c.ClientProcs:
		return c, fmt.Errorf("%w: the rolling restarts do not run with client processes", ErrConfig)
	case spec.replicas && !c.Replicas:
		return c, fmt.Errorf("%w: lock %s runs on nodes with a replica (Replicas, --replicas)", ErrConfig, c.Lock)
	case !spec.fencedlock && c.Lanes > 1:
		return c, fmt.Errorf("%w: lanes share a fencedlock client's local queue; lock %s runs one lane", ErrConfig, c.Lock)
	case !spec.fencedlock && c.ClientProcs:
		return c, fmt.Errorf("%w: client processes run fencedlock only, not %s", ErrConfig, c.Lock)
	case !spec.fencedlock && c.has(fault.ClientClockSkew):
		return c, fmt.Errorf("%w: %s skews the clock fencedlock is given; lock %s reads the real clock", ErrConfig, fault.ClientClockSkew, c.Lock)
	}
	for _, k := range c.Faults {
		if !c.hunt() && huntOnly(k) {
			return c, fmt.Errorf("%w: %s is armed by the %s profile only (--faults %s)", ErrConfig, k, ProfileHunt, ProfileHunt)
		}
	}
	for _, k := range c.Faults {
		if k.NeedsReplicas() && !c.Replicas {
			return c, fmt.Errorf("%w: %s needs nodes with a replica (Replicas, --replicas)", ErrConfig, k)
		}
	}
	for _, k := range c.Faults {
		if !k.Known() {
			return c, fmt.Errorf("%w: %w %q", ErrConfig, fault.ErrUnknown, k)
		}
	}
	return c, nil
}

// nodeKinds are the faults of c that package backend's plan injects.
func (c Config) nodeKinds() []fault.Kind {
	var ks []fault.Kind
	for _, k := range backend.Kinds() {
		if slices.Contains(c.Faults, k) {
			ks = append(ks, k)
		}
	}
	return ks
}

func (c Config) has(k fault.Kind) bool { return slices.Contains(c.Faults, k) }

func (c Config) hunt() bool { return c.Profile == ProfileHunt }

func (c Config) rolling() bool { return c.Profile == ProfileRolling }

// canHunt refuses, before anything starts, a hunt whose clock jumps this
// machine cannot fake.
func (c Config) canHunt() error {
	if c.hunt() && c.ClientProcs {
		// The hunt drops heals on the clients' own node connections (see
		// healLoss), which a client process would have to do itself.
		return fmt.Errorf("%w: the hunt profile does not run with client processes yet", ErrConfig)
	}
	if !c.hunt() || !(c.has(fault.ClockSkew) || c.has(fault.ClockDrift)) || c.Backend != "process" {
		return nil
	}
	lib := os.Getenv(FaketimeEnv)
	if lib == "" {
		lib = faketime.Find()
	}
	if _, err := os.Stat(lib); lib == "" || err != nil {
		return fmt.Errorf("%w: the hunt's clock jumps and drift need libfaketime (install Debian's libfaketime package, set %s, or leave %s and %s out of --faults)",
			ErrConfig, FaketimeEnv, fault.ClockSkew, fault.ClockDrift)
	}
	return nil
}

// CheckOptions are the options a run of c judges its history with; a
// history the run wrote, read back and checked with them, gets the run's
// verdict. Fields left zero take Run's defaults.
func (c Config) CheckOptions() checker.CheckOptions {
	if d, err := c.withDefaults(); err == nil {
		c = d
	}
	// The workload's lock serves waiters in the order they began (Claim 6
	// of docs/protocol.md): judge it. A refused first try is answered
	// within one node timeout, and its wait start is read on the client
	// just before it; twice the node timeout leaves that time, and the
	// scheduling of the client's goroutine, to enter the place on a quorum.
	opts := checker.CheckOptions{OrderMargin: 2 * c.NodeTimeout, ReleaseAllowance: c.releaseAllowance(),
		HarnessTokens: !HasToken(c.Lock)}
	if c.Lock != "" && !IsFencedlock(c.Lock) {
		opts.OrderMargin = 0 // the others promise no order among waiters
	}
	if c.rolling() {
		// The rolling restarts ask whether a second hold is granted while
		// the long one lasts: the contenders' attempts exercise the
		// exclusion, and a lock that keeps it may grant nothing but the
		// long hold (checker.CheckOptions.MinAcquisitions, default 2).
		opts.MinAcquisitions = 1
	}
	if c.Strict {
		opts.Expected = map[checker.Property][]fault.Kind{}
	}
	return opts
}
