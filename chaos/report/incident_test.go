package report

import (
	"strings"
	"testing"

	"github.com/fencedlock/fencedlock/chaos/checker"
	"github.com/fencedlock/fencedlock/chaos/fault"
)

// The one-line reason of an incident names what the checker blamed, and
// never reads as an empty list.
func TestBlameReason(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    checker.Violation
		want []string // in the reason, in order
	}{
		{"breaking fault", checker.Violation{Property: checker.MutualExclusion, Expected: true, Faults: []fault.Kind{fault.ClientPause}},
			[]string{"expected: ", "client-pause (", "outside the lock's assumptions"}},
		{"tolerated fault, node guarantee", checker.Violation{Property: checker.LeftoverGrant, Expected: true, Faults: []fault.Kind{fault.Pause}},
			[]string{"expected: ", "leftover_grant", "every node up", "pause was active"}},
		{"store", checker.Violation{Property: checker.StaleWritesAccepted, Faults: []fault.Kind{fault.ClientPause}},
			[]string{"unexpected: the fenced store"}},
		{"no fault", checker.Violation{Property: checker.MutualExclusion},
			[]string{"unexpected: no fault"}},
		{"tolerated only", checker.Violation{Property: checker.MutualExclusion, Faults: []fault.Kind{fault.Kill}},
			[]string{"unexpected: only kill was active"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := blameReason(tc.v)
			rest := got
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("reason %q: want %q (in order %q)", got, w, tc.want)
				}
				rest = rest[i+len(w):]
			}
			if strings.Contains(got, ": :") {
				t.Fatalf("reason %q names no fault", got)
			}
		})
	}
}
