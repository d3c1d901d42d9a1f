package report

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/fencedlock/fencedlock/chaos/checker"
	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/recorder"
)

// maxTextExamples caps the violations the text summary lists.
const maxTextExamples = 3

// WriteText writes a summary of a few lines for a terminal.
func (r Report) WriteText(w io.Writer) error {
	var b strings.Builder
	if r.Interrupted {
		fmt.Fprintf(&b, "INTERRUPTED after %.1fs: the run was stopped before its duration was over; the verdict covers only the part that ran\n", r.DurationS)
	}
	b.WriteString(verdictText(r))
	for _, w := range r.Warnings {
		fmt.Fprintf(&b, "warning: %s\n", w)
	}
	fmt.Fprintf(&b, "run: %d nodes, %d clients, %.1fs", r.Nodes, r.Clients, r.DurationS)
	if r.Backend != "" {
		fmt.Fprintf(&b, ", backend %s", r.Backend)
	}
	if r.Seed != 0 {
		fmt.Fprintf(&b, ", seed %d", r.Seed)
	}
	if r.Lock != "" {
		fmt.Fprintf(&b, ", lock %s", r.Lock)
	}
	b.WriteString("\n")
	l := r.AcquireLatencyMs
	fmt.Fprintf(&b, "acquisitions: %d ok, %d failed; latency p50 %s p99 %s max %s\n",
		r.Acquisitions, r.AcquireFailures, msText(l.P50), msText(l.P99), msText(l.Max))
	fmt.Fprintf(&b, "faults: %s\n", faultsText(r.Faults))
	if len(r.OutsideAssumptions) > 0 {
		fmt.Fprintf(&b, "  outside the lock's guarantees: %s; mutual exclusion may fail under them, and the fenced store is what must stay correct\n",
			joinKinds(r.OutsideAssumptions))
	}
	for i, f := range r.FailedFaults {
		if i == maxTextExamples {
			fmt.Fprintf(&b, "  ... %d more failed faults in the JSON report\n", len(r.FailedFaults)-i)
			break
		}
		fmt.Fprintf(&b, "  ! FAILED %s on %s at %s: %s\n", f.Kind, f.Target, msText(f.StartMs), f.Error)
	}
	if len(r.ClientProcs) > 0 {
		procsText(&b, r.ClientProcs)
	}
	fmt.Fprintf(&b, "violations: %s\n", countsText(r.Violations, r.ExpectedViolations, r.NotApplicable))
	store := "correct"
	if !r.StoreCorrect {
		store = "NOT CORRECT"
	}
	if !r.StoreChecked {
		store += " (final contents not recorded: lost writes not checked)"
	}
	fmt.Fprintf(&b, "store: %s; %d writes accepted, %d stale writes rejected\n", store, r.WritesAccepted, r.StaleWritesRejected)
	switch {
	case !r.LivenessOK:
		fmt.Fprintf(&b, "liveness: VIOLATED, longest stall %s with a quorum up (threshold %s, on the longest stall)",
			msText(r.LongestStallMs), msText(r.StallThresholdMs))
	case r.StallThresholdMs == 0:
		fmt.Fprintf(&b, "liveness: not judged (no validity ends to derive a threshold from), longest stall %s with a quorum up",
			msText(r.LongestStallMs))
	default:
		fmt.Fprintf(&b, "liveness: ok, longest stall %s with a quorum up (threshold %s, on the longest stall)",
			msText(r.LongestStallMs), msText(r.StallThresholdMs))
	}
	if r.QuorumLostMs > 0 {
		fmt.Fprintf(&b, "; no quorum for %s", msText(r.QuorumLostMs))
	}
	b.WriteString("\n")
	b.WriteString(starvationText(r.Starvation))
	b.WriteString(handoverText(r.Handover))
	for i, in := range r.Incidents {
		if i == maxTextExamples {
			fmt.Fprintf(&b, "  ... %d more incidents in the JSON report\n", len(r.Incidents)-i)
			break
		}
		tag := "UNEXPECTED"
		if in.Expected {
			tag = "expected"
		}
		_, reason, _ := strings.Cut(in.Reason, ": ") // the tag says it
		n := ""
		if in.Violations > 1 {
			n = fmt.Sprintf(" x%d", in.Violations)
		}
		fmt.Fprintf(&b, "  ! %s %s%s at %s: %s\n      %s\n", tag, in.Property, n, msText(in.StartMs), reason, in.Detail)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// verdictText is the verdict line. An ok run with expected violations
// says what they mean: the faults broke the lock's guarantee, not the lock.
func verdictText(r Report) string {
	var kinds []fault.Kind
	for _, k := range slices.Sorted(maps.Keys(r.ViolationsByFault)) {
		if k.BreaksAssumptions() && r.ViolationsByFault[k].Total() > 0 {
			kinds = append(kinds, k)
		}
	}
	if r.Verdict != checker.VerdictOK || r.ExpectedViolations.Total() == 0 || len(kinds) == 0 {
		return fmt.Sprintf("verdict: %s (%s)\n", strings.ToUpper(string(r.Verdict)), r.Reason)
	}
	incidents := 0
	for _, in := range r.Incidents {
		if in.Expected {
			incidents++
		}
	}
	store := "the fenced store stayed correct"
	if !r.StoreChecked {
		store = "the fenced store accepted no stale write (lost writes not checked)"
	}
	return fmt.Sprintf("verdict: OK: the lock's guarantee was broken by faults outside its assumptions (%s: %s in %s, all expected); %s\n",
		joinKinds(kinds), plural(r.ExpectedViolations.Total(), "violation"), plural(incidents, "incident"), store)
}

// Progress formats one line about a run in progress, e.g.
// "t=7.2s acq=1234 fail=3 faults=5 violations=0".
func Progress(s recorder.Stats, violations int) string {
	return fmt.Sprintf("t=%.1fs acq=%d fail=%d faults=%d violations=%d",
		s.Elapsed.Seconds(), s.Acquisitions, s.AcquireFailures, s.Faults, violations)
}

// starvationText is the line about the worst wait of a client for a key
// others got.
func starvationText(s Starvation) string {
	if s.WaitMs == 0 {
		return "starvation: ok, no client waited for a key while others got it\n"
	}
	times := fmt.Sprintf("%d times", s.Others)
	if s.Others == 1 {
		times = "once"
	}
	wait := fmt.Sprintf("worst wait %s by %s for %q while others got it %s",
		msText(s.WaitMs), s.Client, s.Key, times)
	switch {
	case !s.OK:
		return fmt.Sprintf("starvation: VIOLATED, %s (threshold %s, on the worst wait)\n", wait, msText(s.ThresholdMs))
	case !s.Judged:
		return fmt.Sprintf("starvation: not judged (no validity ends to derive a threshold from), %s\n", wait)
	}
	return fmt.Sprintf("starvation: ok, %s (threshold %s, on the worst wait)\n", wait, msText(s.ThresholdMs))
}

// handoverText is the line about how fast keys went from a release to the
// next acquire while clients waited.
func handoverText(h Handover) string {
	if h.Samples == 0 {
		return "handover: not measured, no release while others waited with every node up\n"
	}
	median := fmt.Sprintf("median %s from a release to the next acquire over %d handovers", msText(h.MedianMs), h.Samples)
	slowest := fmt.Sprintf("slowest %s", msText(h.SlowestMs))
	switch {
	case !h.Judged:
		return fmt.Sprintf("handover: not judged (too few handovers), %s, %s\n", median, slowest)
	case !h.OK:
		return fmt.Sprintf("handover: VIOLATED, %s (threshold %s, on the median); %s\n", median, msText(h.ThresholdMs), slowest)
	}
	return fmt.Sprintf("handover: ok, %s (threshold %s, on the median; single handovers may be slower: %s)\n",
		median, msText(h.ThresholdMs), slowest)
}

// procsText lists the client processes, how they ended, and their stops.
func procsText(b *strings.Builder, procs []ClientProc) {
	ended := map[string]int{}
	var pids []string
	for _, p := range procs {
		ended[p.Exit]++
		pids = append(pids, fmt.Sprint(p.PID))
	}
	var exits []string
	for _, e := range slices.Sorted(maps.Keys(ended)) {
		exits = append(exits, fmt.Sprintf("%d %s", ended[e], e))
	}
	fmt.Fprintf(b, "client processes: pids %s; ended: %s\n", strings.Join(pids, " "), strings.Join(exits, ", "))
	for _, p := range procs {
		for _, s := range p.Stops {
			cut := ""
			if s.AtMs+s.ForMs < s.ValidUntilMs {
				cut = " (cut short by the end of the run)"
			}
			fmt.Fprintf(b, "  SIGSTOP client %d (pid %d) at %s for %s, token %d, valid until %s%s\n",
				p.Client, p.PID, msText(s.AtMs), msText(s.ForMs), s.Token, msText(s.ValidUntilMs), cut)
		}
	}
}

func faultsText(faults map[fault.Kind]int) string {
	if len(faults) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(faults)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, faults[k]))
	}
	return strings.Join(parts, ", ")
}

func countsText(found, expected checker.Counts, na []checker.Property) string {
	var parts []string
	for _, p := range checker.Properties() {
		if slices.Contains(na, p) {
			parts = append(parts, fmt.Sprintf("%s n/a", p))
			continue
		}
		s := fmt.Sprintf("%s %d", p, found.Get(p))
		if e := expected.Get(p); e > 0 {
			s += fmt.Sprintf(" (%d expected)", e)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

func joinKinds(kinds []fault.Kind) string {
	s := make([]string, len(kinds))
	for i, k := range kinds {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}

// msText prints a millisecond figure the way time.Duration does.
func msText(ms float64) string {
	return time.Duration(ms * float64(time.Millisecond)).Round(10 * time.Microsecond).String()
}

// plural prints n things, e.g. "1 incident", "3 incidents".
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}
