package checker

import (
	"slices"
	"testing"

	"github.com/fencedlock/fencedlock/chaos/history"
)

// With the harness's tokens (a lock that gives none), the token properties
// are not applicable, not ok: not judged, and listed; the store is judged
// on the harness's numbering, so a stale write that reached the store is
// still counted.
func TestHarnessTokens(t *testing.T) {
	// Tokens that go back (fencing order), repeat (duplicates), and a write
	// by the earlier holder taken after the later one's (a stale write).
	build := func() history.History {
		b := newBuilder(5)
		t0 := b.clean(3, 0, 5)
		a := b.acquire(0, t0, t0+1, 50, 9)
		b.release(a, t0+5, t0+6)
		c := b.acquire(1, t0+10, t0+11, 50, 9) // the same token again
		b.release(c, t0+15, t0+16)
		d := b.acquire(0, t0+20, t0+21, 5, 10)
		e := b.acquire(1, t0+40, t0+41, 50, 11)
		b.write(e, "new", t0+42, t0+43, history.OK, 0)
		b.write(d, "late", t0+44, t0+45, history.OK, 0) // past its validity, after e's
		b.release(e, t0+50, t0+51)
		return b.done(t0 + 100)
	}
	for _, tc := range []struct {
		name      string
		harness   bool
		judged    bool // the token properties were judged
		tokenViol bool // and found violated
	}{
		{"lock's tokens", false, true, true},
		{"harness's tokens", true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := Check(build(), CheckOptions{HarnessTokens: tc.harness})
			for _, p := range TokenProperties() {
				if res.Applicable(p) != tc.judged {
					t.Errorf("Applicable(%s) = %v, want %v", p, res.Applicable(p), tc.judged)
				}
				if got := res.Found.Get(p) > 0; got != tc.tokenViol {
					t.Errorf("%s found %d, want violations: %v", p, res.Found.Get(p), tc.tokenViol)
				}
			}
			if na := slices.Equal(res.NotApplicable, TokenProperties()); na != tc.harness {
				t.Errorf("NotApplicable = %v, want the token properties listed: %v", res.NotApplicable, tc.harness)
			}
			if res.Found.StaleWritesAccepted == 0 {
				t.Errorf("stale writes accepted 0, want the late write counted (%v)", res.Violations)
			}
		})
	}
}
