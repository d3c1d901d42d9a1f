package mutants

import (
	"strings"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/chaos/checker"
	"github.com/fencedlock/fencedlock/chaos/report"
)

// TestEvidence checks that a violation judged on the whole run kills a
// mutant at the end of the run, however early its example ended, and that a
// safety violation known earlier is the evidence then.
func TestEvidence(t *testing.T) {
	handover := report.Example{Property: checker.SlowHandover, EndMs: 5000, Detail: "slow"}
	overlap := report.Example{Property: checker.MutualExclusion, EndMs: 20000, Detail: "overlap"}
	expected := report.Example{Property: checker.MutualExclusion, EndMs: 1000, Expected: true, Detail: "excused"}
	for _, tc := range []struct {
		name     string
		examples []report.Example
		at       time.Duration
		evidence string
	}{
		{"handover alone", []report.Example{expected, handover}, 60 * time.Second, "handover"},
		{"a safety violation first", []report.Example{handover, overlap, expected}, 20 * time.Second, "mutual_exclusion"},
		{"nothing unexpected", []report.Example{expected}, 0, "the reason"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			at, ev := evidence(report.Report{DurationS: 60, Reason: "the reason", Examples: tc.examples})
			if at != tc.at || !strings.HasPrefix(ev, tc.evidence) {
				t.Errorf("evidence at %v: %q; want at %v, %q", at, ev, tc.at, tc.evidence)
			}
		})
	}
}
