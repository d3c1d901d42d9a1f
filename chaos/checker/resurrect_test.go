package checker

import (
	"testing"

	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/history"
)

// TestResurrectedHolds: an extension that succeeds after another hold of the
// key was acquired past the extended hold's validity is a violation, blamed
// and excused like the token properties; one that fails, or began before
// that acquire returned, is not.
func TestResurrectedHolds(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(b *builder)
		want  int  // resurrected_hold violations
		exp   bool // the first one is expected
	}{
		{"extension after another acquire", func(b *builder) {
			a := b.acquire(0, 0, 1, 50, 1)
			b.acquire(1, 40, 60, 50, 2) // returns past a's validity (51)
			b.extend(a, 70, 71, 50, history.OK)
		}, 1, false},
		{"extension that fails", func(b *builder) {
			a := b.acquire(0, 0, 1, 50, 1)
			b.acquire(1, 40, 60, 50, 2)
			b.extend(a, 70, 71, 0, history.LockLost)
		}, 0, false},
		{"extension within the validity", func(b *builder) {
			a := b.acquire(0, 0, 1, 50, 1)
			b.extend(a, 30, 31, 50, history.OK)
			b.acquire(1, 40, 90, 50, 2) // returns past the first validity, before the extended one
			b.release(a, 95, 96)
		}, 0, false},
		{"extension raised by an earlier one, outlived", func(b *builder) {
			a := b.acquire(0, 0, 1, 50, 1)
			b.extend(a, 30, 31, 50, history.OK)   // valid until 81
			b.acquire(1, 60, 85, 50, 2)           // returns past 81
			b.extend(a, 100, 101, 50, history.OK) // resurrected
			b.extend(a, 120, 121, 50, history.OK) // within what the last one gave: no new violation
		}, 1, false},
		{"acquire returned after the extension began", func(b *builder) {
			a := b.acquire(0, 0, 1, 50, 1)
			b.acquire(1, 40, 75, 50, 2)
			b.extend(a, 70, 71, 50, history.OK) // concurrent with the acquire: it may have come first
		}, 0, false},
		{"extension seen late (automatic)", func(b *builder) {
			a := b.acquire(0, 0, 1, 50, 1) // lease 51 from invocation
			b.acquire(1, 40, 60, 50, 2)
			// Recorded at 70 with a validity of 100: it began by 100-51 = 49,
			// before the other acquire returned.
			op := b.held(history.KindExtend, a, 70, 70, history.OK)
			op.ValidUntil = ms(100)
			b.add(op)
		}, 0, false},
		{"under amnesia", func(b *builder) {
			a := b.acquire(0, 0, 1, 50, 1)
			b.fault(fault.RestartWithoutData, 2, 55, 56)
			b.acquire(1, 40, 60, 50, 2)
			b.extend(a, 70, 71, 50, history.OK)
		}, 1, true},
		// Re-creates recorded (WithReacquireOnExtend): one within the
		// validity is the option at work; one past it is a resurrection
		// even with no other hold in between.
		{"re-create within the validity", func(b *builder) {
			a := b.acquire(0, 0, 1, 50, 1)
			b.fault(fault.RestartWithoutData, 2, 10, 12)
			b.recreate(b.extend(a, 30, 31, 50, history.OK), 2) // valid until 51: began well within
			b.recreate(b.extend(a, 60, 61, 50, history.OK), 2) // within what the first gave (81)
		}, 0, false},
		{"re-create after the validity", func(b *builder) {
			a := b.acquire(0, 0, 1, 50, 1)
			b.recreate(b.extend(a, 60, 61, 50, history.OK), 0, 1, 2) // began past 51
		}, 1, false},
		{"re-create after a raised validity", func(b *builder) {
			a := b.acquire(0, 0, 1, 50, 1)
			b.extend(a, 30, 31, 50, history.OK)                // valid until 81
			b.recreate(b.extend(a, 90, 91, 50, history.OK), 1) // began past 81
		}, 1, false},
		{"re-create seen late (automatic), begun within", func(b *builder) {
			a := b.acquire(0, 0, 1, 50, 1) // lease 51 from invocation
			// Recorded at 70 with a validity of 100: it began by 49.
			op := b.held(history.KindExtend, a, 70, 70, history.OK)
			op.ValidUntil, op.Reacquired = ms(100), []int{1}
			b.add(op)
		}, 0, false},
		{"re-create on an extension that failed", func(b *builder) {
			a := b.acquire(0, 0, 1, 50, 1)
			b.extend(a, 30, 31, 50, history.OK)
			// A late answer of the first, recorded with the next call,
			// which the client made past its validity and which failed.
			b.recreate(b.extend(a, 90, 91, 0, history.LockLost), 2)
		}, 0, false},
		{"re-create after the validity, another acquire in between", func(b *builder) {
			a := b.acquire(0, 0, 1, 50, 1)
			b.acquire(1, 40, 60, 50, 2)
			b.recreate(b.extend(a, 70, 71, 50, history.OK), 0) // one violation, not two
		}, 1, false},
		{"re-create after the validity, under amnesia", func(b *builder) {
			a := b.acquire(0, 0, 1, 50, 1)
			b.fault(fault.RestartWithoutData, 2, 55, 56)
			b.recreate(b.extend(a, 60, 61, 50, history.OK), 2)
		}, 1, true},
		{"re-create after the validity, under latency", func(b *builder) {
			a := b.acquire(0, 0, 1, 50, 1)
			b.fault(fault.Latency, 2, 55, 58)
			b.recreate(b.extend(a, 60, 61, 50, history.OK), 2)
		}, 1, false},
		{"under latency", func(b *builder) {
			a := b.acquire(0, 0, 1, 50, 1)
			b.fault(fault.Latency, 2, 55, 65)
			b.acquire(1, 40, 60, 50, 2)
			b.extend(a, 70, 71, 50, history.OK)
		}, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuilder(5)
			tc.build(b)
			res := Check(b.done(200), CheckOptions{})
			var got []Violation
			for _, v := range res.Violations {
				if v.Property == ResurrectedHold {
					got = append(got, v)
				}
			}
			if len(got) != tc.want || res.Found.Get(ResurrectedHold) != tc.want {
				t.Fatalf("%d resurrected holds (counted %d), want %d: %+v", len(got), res.Found.Get(ResurrectedHold), tc.want, got)
			}
			if tc.want > 0 && got[0].Expected != tc.exp {
				t.Fatalf("expected = %v, want %v (faults %v)", got[0].Expected, tc.exp, got[0].Faults)
			}
			if tc.want > 0 && !tc.exp && res.Verdict != VerdictViolated {
				t.Fatalf("verdict %s, want violated", res.Verdict)
			}
		})
	}
}
