package checker

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fencedlock/fencedlock/chaos/history"
)

// TestFormatRules checks the hand-written histories of testdata/format, each
// breaking (or keeping, near the edge) a rule of the current format, against
// the verdict or the line-numbered error the format gives them.
func TestFormatRules(t *testing.T) {
	for _, tc := range []struct {
		file     string
		verdict  Verdict // when the history reads
		found    Counts
		expected Counts
		line     int    // when it does not: the line and field of the error
		field    string //
		msg      string //
		warnings int    // warnings of a version 1 history
	}{
		// No clock error stated: one clock, and a 0.9 ms overlap is one.
		{file: "sub-ms-overlap.jsonl", verdict: VerdictViolated, found: Counts{MutualExclusion: 1}},
		// The same overlap, within the clock error the history states.
		{file: "sub-ms-overlap-within-clock-error.jsonl", verdict: VerdictOK},
		{file: "repeated-entry.jsonl", line: 6, field: "entry", msg: `"x" was written to "db" already (line 3)`},
		// The version 1 rules read it, with a warning for the file and one
		// for the line, and miss the lost write as before.
		{file: "version-1-repeated-entry.jsonl", verdict: VerdictOK, warnings: 2},
		{file: "fault-on-unknown-node.jsonl", line: 2, field: "node", msg: "7 is not a node of the run (it has 3"},
		// Probes of nodes the run does not have would count toward a quorum.
		{file: "probe-on-unknown-node.jsonl", line: 4, field: "node", msg: "7 is not a node of the run (it has 3"},
		{file: "repeated-field.jsonl", line: 4, field: "token", msg: "given more than once"},
		// A version given twice is refused whatever the version: the last,
		// 1, would have the repeated entry pass with a warning.
		{file: "version-given-twice.jsonl", line: 1, field: "version", msg: "given more than once"},
		// The hold lost at the extend's return, 15 ms before the next acquire.
		{file: "lost-extend.jsonl", verdict: VerdictOK},
		// A successful extend after the lost one: the lock said last that
		// the hold lasts to 200 ms, so the other client's grant at 120 ms
		// overlaps it (with a validity end, and without one).
		{file: "lost-extend-then-extended.jsonl", verdict: VerdictViolated, found: Counts{MutualExclusion: 1}},
		{file: "lost-extend-then-extended-no-validity.jsonl", verdict: VerdictViolated, found: Counts{MutualExclusion: 1}},
		// The version 1 rules keep the hold open to the end of the run.
		{file: "version-1-lost-extend.jsonl", verdict: VerdictViolated, found: Counts{MutualExclusion: 1}, warnings: 1},
		// Two writes the store numbered alike: its order would be no order.
		{file: "repeated-seq.jsonl", line: 6, field: "seq", msg: "1 is the sequence number of another write"},
		// A clock error as long as the holds hides any overlap: nothing can
		// be claimed.
		{file: "clock-error-as-long-as-holds.jsonl", verdict: VerdictUnknown},
		{file: "lone-surrogate-keys.jsonl", line: 2, field: "key", msg: `\ud800 is half a surrogate pair, alone`},
	} {
		t.Run(tc.file, func(t *testing.T) {
			f, err := os.Open(filepath.Join("testdata", "format", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			h, warnings, err := history.ReadJSONLWarn(f)
			if tc.line != 0 {
				var le *history.LineError
				if !errors.As(err, &le) || le.Line != tc.line || le.Field != tc.field || !strings.Contains(err.Error(), tc.msg) {
					t.Fatalf("error %v; want line %d, field %q, %q", err, tc.line, tc.field, tc.msg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(warnings) != tc.warnings {
				t.Errorf("warnings %v; want %d", warnings, tc.warnings)
			}
			res := Check(h, CheckOptions{})
			if res.Verdict != tc.verdict || res.Found != tc.found || res.Expected != tc.expected {
				t.Fatalf("verdict %s (%s), found %+v, expected %+v; want %s, %+v, %+v",
					res.Verdict, res.Reason, res.Found, res.Expected, tc.verdict, tc.found, tc.expected)
			}
		})
	}
}
