package checker

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/history"
)

// faultAt is a fault of kind on node or client target from start to end ms.
type faultAt struct {
	kind       fault.Kind
	target     int
	start, end float64
}

// TestBlameTwoHolds checks when a fault explains a violation judged on two
// holds: with the nodes that granted them known, a node fault must have hit,
// within the holds' time, every node their quorums share.
func TestBlameTwoHolds(t *testing.T) {
	a, b := []int{0, 1, 2}, []int{2, 3, 4} // share node 2
	for _, tc := range []struct {
		name     string
		overlap  bool // the holds overlap (mutual exclusion), else they share a token
		ga, gb   []int
		faults   []faultAt
		property Property
		expected bool
	}{
		{name: "skew on the shared node", overlap: true, ga: a, gb: b,
			faults: []faultAt{{fault.ClockSkew, 2, 12, 14}}, property: MutualExclusion, expected: true},
		{name: "skew on a node of one hold only", overlap: true, ga: a, gb: b,
			faults: []faultAt{{fault.ClockSkew, 0, 12, 14}}, property: MutualExclusion},
		{name: "skew on a node of neither", overlap: true, ga: []int{0, 1, 2}, gb: []int{0, 1, 3},
			faults: []faultAt{{fault.ClockSkew, 4, 12, 14}}, property: MutualExclusion},
		{name: "skew over before the holds", overlap: true, ga: a, gb: b,
			faults: []faultAt{{fault.ClockSkew, 2, 1, 5}}, property: MutualExclusion},
		{name: "amnesia of the shared node", overlap: true, ga: a, gb: b,
			faults: []faultAt{{fault.RestartWithoutData, 2, 12, 14}}, property: MutualExclusion, expected: true},
		// The later hold's nodes unknown: it may have been granted by 0, 3, 4.
		{name: "skew on one hold's node, other unknown", overlap: true, ga: a,
			faults: []faultAt{{fault.ClockSkew, 0, 12, 14}}, property: MutualExclusion, expected: true},
		// A hold of four nodes meets every quorum of five in two or more.
		{name: "skew on one of four nodes, other unknown", overlap: true, ga: []int{0, 1, 2, 3},
			faults: []faultAt{{fault.ClockSkew, 0, 12, 14}}, property: MutualExclusion},
		{name: "nodes unknown: by time", overlap: true,
			faults: []faultAt{{fault.ClockSkew, 4, 12, 14}}, property: MutualExclusion, expected: true},
		{name: "pause of a holder", overlap: true, ga: a, gb: b,
			faults: []faultAt{{fault.ClientPause, 0, 12, 14}}, property: MutualExclusion, expected: true},
		{name: "pause of another client", overlap: true, ga: a, gb: b,
			faults: []faultAt{{fault.ClientPause, 2, 12, 14}}, property: MutualExclusion},

		{name: "token: amnesia of the shared node between them", ga: a, gb: b,
			faults: []faultAt{{fault.RestartWithoutData, 2, 22, 25}}, property: DuplicateTokens, expected: true},
		{name: "token: delayed restart of the shared node", ga: a, gb: b,
			faults: []faultAt{{fault.DelayedRestart, 2, 22, 25}}, property: FencingOrder, expected: true},
		{name: "token: amnesia of a node outside the first quorum", ga: a, gb: b,
			faults: []faultAt{{fault.RestartWithoutData, 4, 22, 25}}, property: FencingOrder},
		{name: "token: amnesia before the first acquire", ga: a, gb: b,
			faults: []faultAt{{fault.RestartWithoutData, 2, 1, 5}}, property: FencingOrder},
		{name: "token: amnesia after the second returned", ga: a, gb: b,
			faults: []faultAt{{fault.RestartWithoutData, 2, 40, 45}}, property: DuplicateTokens},
		{name: "token: skew of the shared node", ga: a, gb: b,
			faults: []faultAt{{fault.ClockSkew, 2, 22, 25}}, property: FencingOrder},
		{name: "token: one of two shared nodes lost its data", ga: []int{0, 1, 2}, gb: []int{1, 2, 3},
			faults: []faultAt{{fault.RestartWithoutData, 1, 22, 25}}, property: FencingOrder},
		{name: "token: both shared nodes lost their data", ga: []int{0, 1, 2}, gb: []int{1, 2, 3},
			faults:   []faultAt{{fault.RestartWithoutData, 1, 22, 25}, {fault.RestartWithoutData, 2, 26, 28}},
			property: FencingOrder, expected: true},
		{name: "token: nodes unknown, by time", faults: []faultAt{{fault.RestartWithoutData, 4, 22, 25}},
			property: FencingOrder, expected: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bl := newBuilder(5)
			var ha, hb int
			if tc.overlap {
				ha = bl.acquire(0, 10, 11, 50, 1)
				hb = bl.acquire(1, 30, 31, 50, 2)
			} else {
				ha = bl.acquire(0, 10, 11, 50, 5)
				bl.release(ha, 20, 21)
				hb = bl.acquire(1, 30, 31, 50, 5)
			}
			bl.h.Ops[ha-1].Granted, bl.h.Ops[hb-1].Granted = tc.ga, tc.gb
			for _, f := range tc.faults {
				bl.fault(f.kind, f.target, f.start, f.end)
			}
			res := Check(bl.done(200), CheckOptions{})
			var found bool
			for _, v := range res.Violations {
				if v.Property != tc.property {
					continue
				}
				found = true
				if v.Expected != tc.expected {
					t.Errorf("%s: expected %v, want %v (faults %v: %s)", v.Property, v.Expected, tc.expected, v.Faults, v.Detail)
				}
			}
			if !found {
				t.Fatalf("no %s violation: %+v", tc.property, res.Violations)
			}
		})
	}
}

// TestBlameReach checks that a fault's aftermath reaches only the keys
// held or being acquired while it was active, for their own lease.
func TestBlameReach(t *testing.T) {
	for _, tc := range []struct {
		name      string
		heldKey   string  // the key held during the skew
		gap       float64 // ms from the skew's end to the overlap's holds
		aftermath float64 // CheckOptions.Aftermath, ms; 0: the key's lease
		expected  bool
	}{
		{name: "same key, within its lease", heldKey: "k", gap: 10, expected: true},
		{name: "same key, past its lease", heldKey: "k", gap: 100},
		{name: "other key of a longer lease", heldKey: "u", gap: 10},
		{name: "same key, within a set aftermath", heldKey: "k", gap: 100, aftermath: 200, expected: true},
		{name: "other key, within a set aftermath", heldKey: "u", gap: 10, aftermath: 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bl := newBuilder(5)
			bl.fault(fault.ClockSkew, 0, 0, 2)
			h := bl.acquire(3, 0.5, 1, 50, 1)
			bl.h.Ops[h-1].Key = tc.heldKey
			if tc.heldKey != "k" {
				bl.h.Ops[h-1].ValidUntil = ms(1 + 3_600_000)
			}
			bl.release(h, 3, 4)
			start := 2 + tc.gap
			bl.acquire(0, start, start+1, 30, 2)
			bl.acquire(1, start+20, start+21, 30, 3)
			res := Check(bl.done(start+200), CheckOptions{Aftermath: ms(tc.aftermath)})
			if res.Found.MutualExclusion != 1 || (res.Expected.MutualExclusion == 1) != tc.expected {
				t.Fatalf("found %+v, expected %+v; want one overlap, expected %v", res.Found, res.Expected, tc.expected)
			}
		})
	}
}

// TestBlameEveryPair checks hand-written histories in which the later hold
// breaks a property against more than one earlier hold (or one hold rests
// on two quorums at once): a fault explains the violation only if it
// explains every pair, each on the nodes its own quorums share.
func TestBlameEveryPair(t *testing.T) {
	for _, tc := range []struct {
		file     string
		verdict  Verdict
		found    Counts
		expected Counts
	}{
		// Token 11 after tokens 12 (nodes 0, 1) and 13 (nodes 1, 2); node 2
		// lost its data: it explains 11 after 13, not after 12 (node 0).
		{file: "blame-order-two-earlier", verdict: VerdictViolated, found: Counts{FencingOrder: 1}},
		{file: "blame-order-two-earlier-both-hit", verdict: VerdictOK,
			found: Counts{FencingOrder: 1}, expected: Counts{FencingOrder: 1}},
		// Token 5 three times, on nodes {0,1}, {1,2}, {0,2}; nodes 1 and 0
		// lost their data: the last two share node 2, which kept it.
		{file: "blame-token-thrice", verdict: VerdictViolated,
			found: Counts{FencingOrder: 2, DuplicateTokens: 2}, expected: Counts{FencingOrder: 1, DuplicateTokens: 1}},
		{file: "blame-token-thrice-all-hit", verdict: VerdictOK,
			found: Counts{FencingOrder: 2, DuplicateTokens: 2}, expected: Counts{FencingOrder: 2, DuplicateTokens: 2}},
		// Three holds overlap, on {0,1}, {1,2}, {0,2}; clocks of nodes 1
		// and 2 jumped: the first and the last share node 0.
		{file: "blame-overlap-of-three", verdict: VerdictViolated,
			found: Counts{MutualExclusion: 2}, expected: Counts{MutualExclusion: 1}},
		{file: "blame-overlap-of-three-all-hit", verdict: VerdictOK,
			found: Counts{MutualExclusion: 2}, expected: Counts{MutualExclusion: 2}},
		// A hold granted by {0,1} and extended by {1,2}, both in force when
		// a hold granted by {0,2} begins; node 0's clock jumped, node 2
		// kept the first hold's key.
		{file: "blame-extended-quorum", verdict: VerdictViolated, found: Counts{MutualExclusion: 1}},
		{file: "blame-extended-quorum-both-hit", verdict: VerdictOK,
			found: Counts{MutualExclusion: 1}, expected: Counts{MutualExclusion: 1}},
		// The same, begun after the grant's validity: only the extension's
		// nodes count, and node 2's jump explains it.
		{file: "blame-extended-quorum-after-first", verdict: VerdictOK,
			found: Counts{MutualExclusion: 1}, expected: Counts{MutualExclusion: 1}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", tc.file+".jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			h, err := history.ReadJSONL(bytes.NewReader(data))
			if err != nil {
				t.Fatal(err)
			}
			res := Check(h, CheckOptions{})
			if res.Verdict != tc.verdict || res.Found != tc.found || res.Expected != tc.expected {
				t.Fatalf("verdict %s (%s), found %+v, expected %+v; want %s, %+v, %+v",
					res.Verdict, res.Reason, res.Found, res.Expected, tc.verdict, tc.found, tc.expected)
			}
		})
	}
}
