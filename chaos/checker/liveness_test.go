package checker

import (
	"slices"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/history"
)

func TestLiveness(t *testing.T) {
	// Two bursts of clean cycles with a gap between them in which client 1
	// keeps failing to acquire the free key from 100 to 400 ms; the faults
	// decide whether a quorum was up meanwhile.
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
			stall: ms(301), // free from the last release (98), wanted from 100 until the next success (401)
		},
		{
			name: "a minority down: still a stall", nodes: 5, checked: true,
			faults: func(b *builder) {
				b.fault(fault.Kill, 0, 100, 390)
				b.fault(fault.Pause, 1, 95, 400)
			},
			stall: ms(301), blamed: []fault.Kind{fault.Kill, fault.Pause},
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
			name: "a failed fault may have taken its node down", nodes: 3, checked: true, ok: true,
			faults: func(b *builder) {
				f := b.fault(fault.Kill, 0, 92, 390)
				b.h.Ops[f-1].Outcome, b.h.Ops[f-1].Err = history.Failed, "start: timeout"
				b.fault(fault.Partition, 1, 92, 390)
			},
			stall: ms(401 - 390), quorumOff: ms(390 - 92),
		},
		{
			name: "two faults on one node count once", nodes: 5, checked: true,
			faults: func(b *builder) {
				b.fault(fault.Kill, 0, 92, 380)
				b.fault(fault.Partition, 0, 92, 390)
				b.fault(fault.Partition, 1, 92, 390)
			},
			stall: ms(301),
		},
		{
			name: "latency and skew leave nodes up", nodes: 3, checked: true,
			faults: func(b *builder) {
				b.fault(fault.Latency, 0, 92, 380)
				b.fault(fault.ClockSkew, 1, 92, 390)
			},
			stall: ms(301),
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

// TestStallIsAViolation plants stalls in histories and checks that the
// verdict counts exactly the ones that are stalls: a free key that clients
// keep failing to get with a quorum up, under the derived threshold.
func TestStallIsAViolation(t *testing.T) {
	for _, tc := range []struct {
		name    string
		history func(b *builder) history.History
		verdict Verdict
		stalls  int
		longest time.Duration
	}{
		{
			// Leases of 50 ms (validity end 51 ms after the invoke), releases of
			// 1 ms: threshold 2*51 + 4*1 = 106 ms. Client 1 fails for 300 ms.
			name: "planted stall",
			history: func(b *builder) history.History {
				t := b.clean(10, 0, 1)
				b.failedAcquire(1, t, t+150)
				b.failedAcquire(1, t+150, t+300) // one waiter retrying: still wanted
				return b.done(b.clean(10, t+300, 11))
			},
			verdict: VerdictViolated, stalls: 1, longest: ms(301), // wanted from 100 to the success at 401
		},
		{
			name: "a stall just under the threshold",
			history: func(b *builder) history.History {
				t := b.clean(10, 0, 1)
				b.failedAcquire(1, t, t+100)
				return b.done(b.clean(10, t+100, 11))
			},
			verdict: VerdictOK, longest: ms(101),
		},
		{
			name: "a stall with a majority down is not one",
			history: func(b *builder) history.History {
				t := b.clean(10, 0, 1)
				for n := range 3 {
					b.fault(fault.Partition, n, t, t+300)
				}
				b.failedAcquire(1, t, t+300)
				return b.done(b.clean(10, t+300, 11))
			},
			verdict: VerdictOK, longest: ms(1), // each clean acquire's own millisecond
		},
		{
			name: "a long hold is not a stall",
			history: func(b *builder) history.History {
				t := b.clean(10, 0, 1)
				a := b.acquire(0, t, t+1, 1000, 11) // a lease of a second
				b.failedAcquire(1, t+2, t+700)
				b.release(a, t+700, t+701)
				return b.done(b.clean(10, t+702, 12))
			},
			verdict: VerdictOK, longest: ms(1), // each clean acquire's own millisecond
		},
		{
			name: "nobody wanting the key is not a stall",
			history: func(b *builder) history.History {
				t := b.clean(10, 0, 1)
				return b.done(b.clean(10, t+2000, 11))
			},
			verdict: VerdictOK, longest: ms(1), // each clean acquire's own millisecond
		},
		{
			name: "one key starved while another proceeds",
			history: func(b *builder) history.History {
				t := b.clean(10, 0, 1)
				b.add(history.Op{Kind: history.KindAcquire, Client: 2, Key: "other", Invoke: ms(t), Complete: ms(t + 400),
					Outcome: history.Failed, Err: "not acquired"})
				t = b.clean(40, t, 11) // "k" goes on being acquired
				b.add(history.Op{Kind: history.KindAcquire, Client: 2, Key: "other", Invoke: ms(t), Complete: ms(t + 1),
					Outcome: history.OK, Token: 1, ValidUntil: ms(t + 51)})
				return b.done(t + 100)
			},
			verdict: VerdictViolated, stalls: 1, longest: ms(401),
		},
		{
			// "long" is acquired once with a lease of an hour: k's threshold
			// stays its own 106 ms.
			name: "another key's long lease does not excuse a stall",
			history: func(b *builder) history.History {
				b.add(history.Op{Kind: history.KindAcquire, Client: 2, Key: "long", Invoke: 0, Complete: ms(1),
					Outcome: history.OK, Token: 1, ValidUntil: time.Hour})
				t := b.clean(10, 0, 1)
				b.failedAcquire(1, t, t+300)
				return b.done(b.clean(10, t+300, 11))
			},
			verdict: VerdictViolated, stalls: 1, longest: ms(301),
		},
		{
			// "never" is wanted for 300 ms and never granted: its lease is
			// not in the history, so it takes the longest, an hour's.
			name: "a key never granted is judged on the longest lease",
			history: func(b *builder) history.History {
				b.add(history.Op{Kind: history.KindAcquire, Client: 2, Key: "long", Invoke: 0, Complete: ms(1),
					Outcome: history.OK, Token: 1, ValidUntil: time.Hour})
				t := b.clean(10, 0, 1)
				b.add(history.Op{Kind: history.KindAcquire, Client: 2, Key: "never", Invoke: ms(t), Complete: ms(t + 300),
					Outcome: history.Failed, Err: "not acquired"})
				return b.done(b.clean(10, t, 11))
			},
			verdict: VerdictOK, longest: ms(1), // the worst for its threshold: a clean acquire's own millisecond
		},
		{
			name: "no validity ends: measured, not judged",
			history: func(b *builder) history.History {
				t := b.clean(10, 0, 1)
				b.failedAcquire(1, t, t+300)
				h := b.done(b.clean(10, t+300, 11))
				for i := range h.Ops {
					h.Ops[i].ValidUntil = 0
				}
				return h
			},
			verdict: VerdictOK, longest: ms(301),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := Check(tc.history(newBuilder(5)), CheckOptions{})
			if res.Verdict != tc.verdict || res.Found.Liveness != tc.stalls || res.Liveness.LongestStall != tc.longest {
				t.Fatalf("verdict %s (%s), %d stalls, longest %v; want %s, %d, %v\n%+v",
					res.Verdict, res.Reason, res.Found.Liveness, res.Liveness.LongestStall,
					tc.verdict, tc.stalls, tc.longest, res.Liveness)
			}
			if res.Liveness.OK != (tc.stalls == 0) {
				t.Errorf("Liveness.OK = %v with %d stalls", res.Liveness.OK, tc.stalls)
			}
			if tc.stalls > 0 && res.Found.Total() != tc.stalls {
				t.Errorf("other violations: %+v", res.Violations)
			}
		})
	}
}

func TestStallThreshold(t *testing.T) {
	b := newBuilder(3)
	a := b.acquire(0, 0, 10, 100, 1)  // lease 110 ms
	b.release(a, 20, 23)              // 3 ms
	a = b.acquire(1, 200, 203, 50, 2) // lease 53 ms
	b.release(a, 210, 215)            // 5 ms
	if got, want := Check(b.done(300), CheckOptions{}).Liveness.Threshold, 2*ms(110)+4*ms(5); got != want {
		t.Errorf("threshold %v, want twice the longest lease plus four times the p99 release latency, %v", got, want)
	}
	if got := Check(b.done(300), CheckOptions{StallThreshold: time.Second}).Liveness.Threshold; got != time.Second {
		t.Errorf("threshold %v, want the one given", got)
	}
	b = newBuilder(3)
	b.acquire(0, 0, 10, 100, 1)
	if got, want := Check(b.done(300), CheckOptions{}).Liveness.Threshold, 2*ms(110)+4*ms(10); got != want {
		t.Errorf("without releases: threshold %v, want four times the acquire latency instead, %v", got, want)
	}
	// Each key has its own: the worst stall, k's 10 ms, is judged on k's
	// lease, not on the hour of "long".
	b = newBuilder(3)
	a = b.acquire(0, 0, 10, 100, 1) // lease 110 ms
	b.release(a, 20, 23)
	b.add(history.Op{Kind: history.KindAcquire, Client: 1, Key: "long", Invoke: ms(30), Complete: ms(31),
		Outcome: history.OK, Token: 1, ValidUntil: ms(30) + time.Hour})
	if l := Check(b.done(300), CheckOptions{}).Liveness; l.Key != "k" || l.Threshold != 2*ms(110)+4*ms(3) {
		t.Errorf("worst stall of %q, threshold %v; want k's, %v", l.Key, l.Threshold, 2*ms(110)+4*ms(3))
	}
}

func TestIntervals(t *testing.T) {
	iv := func(pairs ...time.Duration) []interval {
		var out []interval
		for i := 0; i < len(pairs); i += 2 {
			out = append(out, interval{pairs[i], pairs[i+1]})
		}
		return out
	}
	if got, want := union(iv(5, 8, 0, 2, 1, 3, 8, 9, 10, 10)), iv(0, 3, 5, 9); !slices.Equal(got, want) {
		t.Errorf("union = %v, want %v", got, want)
	}
	if got, want := subtract(iv(0, 10, 20, 30), iv(2, 3, 5, 22, 25, 40)), iv(0, 2, 3, 5, 22, 25); !slices.Equal(got, want) {
		t.Errorf("subtract = %v, want %v", got, want)
	}
	if got := overlap(iv(0, 2, 3, 5, 22, 25), 1, 23); got != 1+2+1 {
		t.Errorf("overlap = %v, want 4", got)
	}
}
