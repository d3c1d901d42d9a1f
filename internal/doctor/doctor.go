// Package doctor checks Redis nodes against what the lock's guarantees rest
// on (docs/protocol.md): fence counters that survive (persistence, no
// eviction), independent primaries, clocks that drift less than the lock's
// allowance, round trips well inside the node timeout, and a user allowed to
// run every command the lock sends. Each check yields a [Finding]: ok, warn
// or fail, with the reason and the fix. The CLI's `fencedlock doctor` prints
// them; `run` and `status` use [Reach] and [Unreachable] alone.
//
// The package needs only go-redis: the lock (package redlock) does not
// import it, and it does not import the lock; the defaults it compares
// against are derived in timing.go from the lock's documented ones.
package doctor

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Status is a finding's verdict, ordered: OK < Warn < Fail.
type Status int

const (
	OK   Status = iota // the guarantee's assumption holds
	Warn               // a guarantee is weaker than it could be, or could not be checked
	Fail               // a guarantee does not hold, or the lock cannot work on the node
)

func (s Status) String() string {
	switch s {
	case OK:
		return "ok"
	case Warn:
		return "warn"
	}
	return "fail"
}

// MarshalText writes the status as "ok", "warn" or "fail".
func (s Status) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads what MarshalText writes.
func (s *Status) UnmarshalText(b []byte) error {
	switch string(b) {
	case "ok":
		*s = OK
	case "warn":
		*s = Warn
	case "fail":
		*s = Fail
	default:
		return fmt.Errorf("doctor: unknown status %q", b)
	}
	return nil
}

// Finding is the outcome of one check on one node, or on the set of nodes
// (Node "").
type Finding struct {
	Node   string `json:"node,omitempty"`
	Check  string `json:"check"` // reach, role, persistence, eviction, clock, latency, scripting, acl, quorum
	Status Status `json:"status"`
	Reason string `json:"reason"`
	Fix    string `json:"fix,omitempty"`
}

// Node is one node to check: the address as the user gave it, and a client
// for it. The client's own timeouts bound each call.
type Node struct {
	Addr   string
	Client *redis.Client
}

// Config says what lock the nodes are checked for. A zero Config is valid:
// the defaults are those of `fencedlock run`.
type Config struct {
	// TTL of the lock. Default 10s. The drift allowance and the node
	// timeout are derived from it as the lock derives them by default.
	TTL time.Duration
	// ReplicaAcks is the lock's WithReplicaAcks: how many replicas of a
	// primary acknowledge each write before it counts. Default 0.
	ReplicaAcks int
}

// DefaultTTL is the TTL a zero Config checks for: `fencedlock run`'s default.
const DefaultTTL = 10 * time.Second

// Report is what Run found.
type Report struct {
	TTL            time.Duration `json:"-"`
	DriftAllowance time.Duration `json:"-"`
	NodeTimeout    time.Duration `json:"-"`
	Findings       []Finding     `json:"findings"`
	Unreachable    []string      `json:"unreachable,omitempty"` // nodes that did not answer
}

// MarshalJSON writes the durations in milliseconds.
func (r *Report) MarshalJSON() ([]byte, error) {
	type plain Report
	return json.Marshal(struct {
		TTLMs            float64 `json:"ttl_ms"`
		DriftAllowanceMs float64 `json:"drift_allowance_ms"`
		NodeTimeoutMs    float64 `json:"node_timeout_ms"`
		*plain
	}{ms(r.TTL), ms(r.DriftAllowance), ms(r.NodeTimeout), (*plain)(r)})
}

// Worst is the worst status among the findings, but for those that say a
// node is unreachable (listed in Unreachable): a node that did not answer
// is not a failed check of a node that did.
func (r *Report) Worst() Status {
	w := OK
	for _, f := range r.Findings {
		if f.Check != checkReach || !slices.Contains(r.Unreachable, f.Node) {
			w = max(w, f.Status)
		}
	}
	return w
}

// Run checks each node, then the set. Nodes are checked in parallel, each
// one's checks in order; it returns when all are done. The clock check
// spends up to a second per node measuring rate (clock.go).
func Run(ctx context.Context, nodes []Node, cfg Config) *Report {
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultTTL
	}
	t := timingFor(cfg.TTL)
	rep := &Report{TTL: cfg.TTL, DriftAllowance: t.allowance, NodeTimeout: t.nodeTimeout}
	facts := make([]*nodeFacts, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() { facts[i] = examine(ctx, n, cfg, t) })
	}
	wg.Wait()
	for _, f := range facts {
		if f.unreachable {
			rep.Unreachable = append(rep.Unreachable, f.addr)
		}
		rep.Findings = append(rep.Findings, f.findings...)
	}
	rep.Findings = append(rep.Findings, quorumFindings(len(nodes))...)
	rep.Findings = append(rep.Findings, sameServerFindings(facts)...)
	rep.Findings = append(rep.Findings, clockSpreadFindings(facts, t)...)
	return rep
}

// nodeFacts is what the checks of one node found, and what the set checks
// need from it.
type nodeFacts struct {
	addr        string
	findings    []Finding
	unreachable bool
	runID       string        // INFO server run_id
	clock       *clockReading // nil when TIME failed
}

func (f *nodeFacts) add(check string, s Status, reason, fix string) {
	f.findings = append(f.findings, Finding{Node: f.addr, Check: check, Status: s, Reason: reason, Fix: fix})
}

// examine runs the checks of one node, in order: the clock's first reading
// comes first and its second last, so that the rate is measured over the
// whole examination.
func examine(ctx context.Context, n Node, cfg Config, t timing) *nodeFacts {
	f := &nodeFacts{addr: n.Addr}
	if !reach(ctx, n.Client, f) {
		return f
	}
	first := readClock(ctx, n.Client)
	info := readInfo(ctx, n.Client)
	conf := readConfig(ctx, n.Client)
	checkRole(info, conf, cfg.ReplicaAcks, t, f)
	checkPersistence(conf, f)
	checkEviction(conf, f)
	rtts := checkLatency(ctx, n.Client, t, f)
	checkScripting(ctx, n.Client, info, f)
	checkACL(ctx, n.Client, cfg.ReplicaAcks, f)
	checkClock(ctx, n.Client, first, rtts, t, f)
	return f
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
