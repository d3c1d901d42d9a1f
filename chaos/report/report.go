// Package report turns a checked chaos run into what people read: a JSON
// report with the fields tools rely on, a short text summary for the
// terminal, a one-line progress formatter for a run in progress, and a
// self-contained HTML timeline (inline CSS, script and SVG, no external
// assets) of holds, faults and violations, with an overview of the whole run
// to zoom from and charts of throughput and latency. It only formats: the
// verdict and every count come from checker.Check, so the report never
// claims more than the checker.
package report

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/fencedlock/fencedlock/chaos/checker"
	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/history"
)

// Run is what a chaos run did.
type Run struct {
	Nodes    int           // lock nodes; zero means History.Nodes
	Clients  int           // workload clients
	Duration time.Duration // how long the workload ran
	Backend  string        // where the nodes ran, e.g. "process" or "docker"
	Seed     int64         // the seed of the fault schedule
	Lock     string        // the lock the workload drove (chaos.Locks); "" is fencedlock
	History  history.History
	// Result is checker.Check(History, ...); the zero Result means
	// Check(History, CheckOptions{}).
	Result checker.Result
	// ClientProcs lists the client processes, when the clients ran as
	// processes of their own; nil when they ran inside the harness.
	ClientProcs []ClientProc
	// Requested lists the fault kinds the run was asked to inject; a kind
	// among them that never happened is a warning. Nil: not known (a
	// recorded history), no warnings.
	Requested []fault.Kind
	// Interrupted is set when the run was stopped before its duration was
	// over (SIGINT, SIGTERM: its ctx was cancelled): the verdict covers only
	// the part that ran.
	Interrupted bool
}

// checked returns run with its Result filled in.
func (run Run) checked() Run {
	if run.Result.Verdict == "" {
		run.Result = checker.Check(run.History, checker.CheckOptions{})
	}
	return run
}

// Report is the JSON report of a run. The fields up to Verdict are a
// contract that scripts rely on; the rest are extras.
type Report struct {
	Nodes               int                `json:"nodes"`
	Clients             int                `json:"clients"`
	DurationS           float64            `json:"duration_s"`
	Acquisitions        int                `json:"acquisitions"`
	AcquireFailures     int                `json:"acquire_failures"`
	Faults              map[fault.Kind]int `json:"faults"`
	Violations          checker.Counts     `json:"violations"`
	StaleWritesRejected int                `json:"stale_writes_rejected"`
	Verdict             checker.Verdict    `json:"verdict"`
	// Interrupted: the run was stopped before its duration was over; the
	// verdict covers only the part that ran.
	Interrupted bool `json:"interrupted"`
	// Warnings are what makes the run weaker than asked for, e.g. a fault
	// that was requested and never happened.
	Warnings []string `json:"warnings,omitempty"`

	Reason string `json:"reason"`
	// Lock is the lock the workload drove; omitted for fencedlock's own
	// runs before locks could be compared.
	Lock string `json:"lock,omitempty"`
	// NotApplicable lists the properties not judged, since the lock lacks
	// what they are about (its counts in Violations are zero and mean
	// nothing): fencing_order and duplicate_tokens for a lock with no
	// fencing token.
	NotApplicable      []checker.Property            `json:"not_applicable,omitempty"`
	Backend            string                        `json:"backend,omitempty"`
	Seed               int64                         `json:"seed"`
	ExpectedViolations checker.Counts                `json:"expected_violations"`
	ViolationsByFault  map[fault.Kind]checker.Counts `json:"violations_by_fault"`
	StoreCorrect       bool                          `json:"store_correct"`
	StoreChecked       bool                          `json:"store_checked"`
	WritesAccepted     int                           `json:"writes_accepted"`
	AcquireLatencyMs   Latency                       `json:"acquire_latency_ms"`
	LongestStallMs     float64                       `json:"longest_stall_ms"`
	StallThresholdMs   float64                       `json:"stall_threshold_ms"`
	LivenessOK         bool                          `json:"liveness_ok"`
	QuorumLostMs       float64                       `json:"quorum_lost_ms"`
	Starvation         Starvation                    `json:"starvation"`
	Handover           Handover                      `json:"handover"`
	Examples           []Example                     `json:"examples,omitempty"`
	// Incidents groups every violation by cause (see Incident).
	Incidents []Incident `json:"incidents,omitempty"`
	// OutsideAssumptions lists the injected kinds that break an assumption
	// of the lock: mutual exclusion may fail under them, and the fenced
	// store is what must stay correct.
	OutsideAssumptions []fault.Kind `json:"outside_assumptions,omitempty"`
	// FailedFaults lists the faults that could not be injected or undone;
	// they are not counted in Faults, and make the verdict unknown.
	FailedFaults []FailedFault `json:"failed_faults,omitempty"`
	// ClientProcs lists the client processes, if the clients ran as such.
	ClientProcs []ClientProc `json:"client_procs,omitempty"`
}

// Starvation is the worst wait of one client for a key that other clients
// kept getting (see checker.Starvation).
type Starvation struct {
	OK          bool    `json:"ok"`
	Judged      bool    `json:"judged"`       // a threshold applied (false: no validity ends to derive it from)
	WaitMs      float64 `json:"wait_ms"`      // 0: no client waited while others got the key
	ThresholdMs float64 `json:"threshold_ms"` // the threshold of the wait's key; 0 when not judged or no wait
	Client      string  `json:"client,omitempty"`
	Key         string  `json:"key,omitempty"`
	Others      int     `json:"others"` // grants to other clients during the wait
}

// Handover is how fast keys passed from a release to the next acquire
// while clients waited for them (see checker.Handover).
type Handover struct {
	OK          bool    `json:"ok"`
	Judged      bool    `json:"judged"`  // enough handovers were measured to judge their median
	Samples     int     `json:"samples"` // handovers measured (with every node up); 0: none
	MedianMs    float64 `json:"median_ms"`
	SlowestMs   float64 `json:"slowest_ms"`
	ThresholdMs float64 `json:"threshold_ms"`  // 0 when not judged
	Key         string  `json:"key,omitempty"` // the key of the median handover
}

// FailedFault is a fault that could not be injected or undone.
type FailedFault struct {
	Kind    fault.Kind `json:"kind"`
	Target  string     `json:"target"` // "node 2", "client 0"
	StartMs float64    `json:"start_ms"`
	EndMs   float64    `json:"end_ms"`
	Error   string     `json:"error"`
}

// Latency summarises how long successful acquires took, in milliseconds.
type Latency struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// Example is one violation, as the report shows it.
type Example struct {
	Property checker.Property `json:"property"`
	Key      string           `json:"key"`
	Ops      []int            `json:"ops"`
	StartMs  float64          `json:"start_ms"`
	EndMs    float64          `json:"end_ms"`
	Faults   []fault.Kind     `json:"faults"`
	Expected bool             `json:"expected"`
	Detail   string           `json:"detail"`
}

// examplesPerProperty caps the examples of each property in a report.
const examplesPerProperty = 5

// New builds the report of run.
func New(run Run) Report {
	run = run.checked()
	res := run.Result
	r := Report{
		Nodes:               cmp.Or(run.Nodes, run.History.Nodes),
		Clients:             run.Clients,
		DurationS:           run.Duration.Seconds(),
		Acquisitions:        res.Acquisitions,
		AcquireFailures:     res.AcquireFailures,
		Faults:              map[fault.Kind]int{},
		Violations:          res.Found,
		StaleWritesRejected: res.StaleWritesRejected,
		Verdict:             res.Verdict,
		Reason:              res.Reason,
		Lock:                run.Lock,
		NotApplicable:       res.NotApplicable,
		Backend:             run.Backend,
		Seed:                run.Seed,
		ExpectedViolations:  res.Expected,
		ViolationsByFault:   maps.Clone(res.ByFault),
		StoreCorrect:        res.StoreCorrect,
		StoreChecked:        res.StoreChecked,
		WritesAccepted:      res.Writes,
		AcquireLatencyMs:    latency(run.History),
		LongestStallMs:      ms(res.Liveness.LongestStall),
		StallThresholdMs:    ms(res.Liveness.Threshold),
		LivenessOK:          res.Liveness.OK,
		QuorumLostMs:        ms(res.Liveness.QuorumLost),
		Starvation:          starvation(run.History, res.Starvation),
		Handover:            handover(res.Handover),
		ClientProcs:         run.ClientProcs,
		Interrupted:         run.Interrupted,
		Incidents:           incidents(run.History, res.Violations),
	}
	if r.ViolationsByFault == nil {
		r.ViolationsByFault = map[fault.Kind]checker.Counts{}
	}
	for _, f := range res.Faults {
		r.Faults[f.Kind]++
	}
	for _, k := range slices.Sorted(maps.Keys(r.Faults)) {
		if k.BreaksAssumptions() {
			r.OutsideAssumptions = append(r.OutsideAssumptions, k)
		}
	}
	r.Warnings = missingFaults(run.Requested, res)
	for _, f := range res.FailedFaults {
		r.FailedFaults = append(r.FailedFaults, FailedFault{Kind: f.Kind, Target: f.Target(),
			StartMs: ms(f.Start), EndMs: ms(f.End), Error: f.Err})
	}
	// Unexpected violations first: they are the ones to look at.
	vs := slices.Clone(res.Violations)
	slices.SortStableFunc(vs, func(a, b checker.Violation) int {
		return cmp.Compare(boolInt(a.Expected), boolInt(b.Expected))
	})
	shown := map[checker.Property]int{}
	for _, v := range vs {
		if shown[v.Property] == examplesPerProperty {
			continue
		}
		shown[v.Property]++
		r.Examples = append(r.Examples, Example{Property: v.Property, Key: v.Key, Ops: v.Ops,
			StartMs: ms(v.Start), EndMs: ms(v.End), Faults: v.Faults, Expected: v.Expected, Detail: v.Detail})
	}
	return r
}

// missingFaults warns, in one line, of the requested kinds that neither
// happened nor failed (failed faults are listed on their own).
func missingFaults(requested []fault.Kind, res checker.Result) []string {
	tried := map[fault.Kind]bool{}
	for _, f := range append(slices.Clone(res.Faults), res.FailedFaults...) {
		tried[f.Kind] = true
	}
	var missing []string
	for _, k := range requested {
		if !tried[k] {
			missing = append(missing, string(k))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return []string{fmt.Sprintf("requested but never injected in this run: %s (the run may be too short for them: try a longer --duration)",
		strings.Join(missing, ", "))}
}

// WriteJSON writes r as indented JSON.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// starvation returns the report of s.
func starvation(h history.History, s checker.Starvation) Starvation {
	r := Starvation{OK: s.OK, Judged: s.Judged, WaitMs: ms(s.Wait), Others: s.Others}
	if s.Judged {
		r.ThresholdMs = ms(s.Threshold)
	}
	if s.Wait > 0 {
		r.Client, r.Key = h.ClientName(s.Client), s.Key
	}
	return r
}

// handover returns the report of s.
func handover(s checker.Handover) Handover {
	return Handover{OK: s.OK, Judged: s.Judged, Samples: s.Samples, MedianMs: ms(s.Median),
		SlowestMs: ms(s.Slowest), ThresholdMs: ms(s.Threshold), Key: s.Key}
}

// latency returns the p50, p99 and max of successful acquires of h.
func latency(h history.History) Latency {
	var ds []time.Duration
	for _, op := range h.Ops {
		if op.Kind == history.KindAcquire && op.Outcome == history.OK {
			ds = append(ds, op.Complete-op.Invoke)
		}
	}
	if len(ds) == 0 {
		return Latency{}
	}
	slices.Sort(ds)
	return Latency{P50: ms(percentile(ds, 50)), P99: ms(percentile(ds, 99)), Max: ms(ds[len(ds)-1])}
}

// percentile returns the nearest-rank p-th percentile of sorted ds.
func percentile(ds []time.Duration, p int) time.Duration {
	i := (len(ds)*p + 99) / 100 // ceil(len*p/100), 1-based
	return ds[max(i, 1)-1]
}

// ms is d in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
