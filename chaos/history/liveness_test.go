package history

import (
	"slices"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/chaos/fault"
)

func TestLiveness(t *testing.T) {
	// Two bursts of clean cycles with a 300 ms gap between them; the faults
	// decide whether a quorum was up during the gap.
	for _, tc := range []struct {
		name      string
		nodes     int
		faults    func(b *builder)
		checked   bool
		ok        bool
		stall     time.Duration
		quorumOff time.Duration
		blamed    []fault.Kind
	}{
		{
			name: "no faults: the gap is a stall", nodes: 5, checked: true,
			stall: ms(310), // from the last success (91) to the next (401)
		},
		{
			name: "a minority down: still a stall", nodes: 5, checked: true,
			faults: func(b *builder) {
				b.fault(fault.Kill, 0, 100, 390)
				b.fault(fault.Pause, 1, 95, 400)
			},
			stall: ms(310), blamed: []fault.Kind{fault.Kill, fault.Pause},
		},
		{
			name: "a majority down: no stall", nodes: 5, checked: true, ok: true,
			faults: func(b *builder) {
				b.fault(fault.Kill, 0, 92, 380)
				b.fault(fault.Pause, 1, 92, 385)
				b.fault(fault.Partition, 2, 92, 390)
			},
			stall: ms(401 - 380), quorumOff: ms(380 - 92),
		},
		{
			name: "two faults on one node count once", nodes: 5, checked: true,
			faults: func(b *builder) {
				b.fault(fault.Kill, 0, 92, 380)
				b.fault(fault.Partition, 0, 92, 390)
				b.fault(fault.Partition, 1, 92, 390)
			},
			stall: ms(310),
		},
		{
			name: "latency and skew leave nodes up", nodes: 3, checked: true,
			faults: func(b *builder) {
				b.fault(fault.Latency, 0, 92, 380)
				b.fault(fault.ClockSkew, 1, 92, 390)
			},
			stall: ms(310),
		},
		{
			name: "no node count: not checked", nodes: 0, ok: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuilder(tc.nodes)
			if tc.faults != nil {
				tc.faults(b)
			}
			end := b.clean(10, 0, 1)
			b.failedAcquire(1, end, end+300)
			b.clean(10, end+300, 11)
			l := Check(b.done(end+400), CheckOptions{StallThreshold: ms(100)}).Liveness
			if l.Checked != tc.checked || l.OK != tc.ok || l.LongestStall != tc.stall || l.QuorumLost != tc.quorumOff {
				t.Fatalf("got %+v; want checked %v, ok %v, stall %v, quorum lost %v", l, tc.checked, tc.ok, tc.stall, tc.quorumOff)
			}
			if tc.blamed != nil && !slices.Equal(l.Faults, tc.blamed) {
				t.Errorf("stall blamed on %v, want %v", l.Faults, tc.blamed)
			}
		})
	}
}
