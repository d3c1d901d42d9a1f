package checker

import (
	"slices"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/history"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name     string
		history  func(b *builder) history.History
		opts     CheckOptions
		verdict  Verdict
		found    Counts
		expected Counts
		blamed   []fault.Kind // kinds of the first violation
		rejected int
	}{
		{
			name:    "clean serial run",
			history: func(b *builder) history.History { return b.done(b.clean(9, 0, 1)) },
			verdict: VerdictOK,
		},
		{
			name: "clean run under allowed faults",
			history: func(b *builder) history.History {
				b.fault(fault.Kill, 0, 5, 40)
				b.fault(fault.Partition, 1, 20, 60)
				b.fault(fault.Latency, 2, 0, 90)
				b.failedAcquire(1, 0, 2)
				return b.done(b.clean(9, 0, 1))
			},
			verdict: VerdictOK,
		},
		{
			name: "overlapping holds",
			history: func(b *builder) history.History {
				t := b.clean(3, 0, 1)
				b.acquire(0, t, t+1, 50, 4)
				b.acquire(1, t+2, t+3, 50, 5) // client 0 still holds
				return b.done(t + 100)
			},
			verdict: VerdictViolated,
			found:   Counts{MutualExclusion: 1},
		},
		{
			name: "overlap within the clock error",
			history: func(b *builder) history.History {
				a := b.acquire(0, 0, 1, 50, 1)
				b.release(a, 10, 11)
				b.acquire(1, 9, 9.5, 50, 2) // returned 0.5 ms before the release call
				b.h.ClockError = time.Millisecond
				return b.done(100)
			},
			verdict: VerdictOK,
		},
		{
			// Found by the reference checker: the overlap ends where the
			// shorter hold does, not where the longer one does.
			name: "short hold inside another, within the clock error",
			history: func(b *builder) history.History {
				a := b.acquire(0, 0, 1, 50, 1)
				b.release(a, 10, 11)
				c := b.acquire(1, 8, 9.2, 50, 2)
				b.release(c, 9.5, 9.6) // held 0.3 ms, inside a's hold
				b.h.ClockError = 400 * time.Microsecond
				return b.done(100)
			},
			verdict: VerdictOK,
		},
		{
			name: "overlap past the clock error",
			history: func(b *builder) history.History {
				a := b.acquire(0, 0, 1, 50, 1)
				b.release(a, 10, 11)
				b.acquire(1, 9, 9.5, 50, 2) // returned 0.5 ms before the release call
				b.h.ClockError = 499 * time.Microsecond
				return b.done(100)
			},
			verdict: VerdictViolated,
			found:   Counts{MutualExclusion: 1},
		},
		{
			name: "hold ends at its validity",
			history: func(b *builder) history.History {
				b.acquire(0, 0, 1, 20, 1) // never released: valid until 21
				b.acquire(1, 5, 30, 20, 2)
				return b.done(100)
			},
			verdict: VerdictOK,
		},
		{
			name: "an extension keeps the hold",
			history: func(b *builder) history.History {
				a := b.acquire(0, 0, 1, 20, 1)
				b.extend(a, 15, 16, 50, history.OK) // valid until 66
				b.acquire(1, 5, 30, 20, 2)
				return b.done(100)
			},
			verdict: VerdictViolated,
			found:   Counts{MutualExclusion: 1},
		},
		{
			name: "a failed extension does not",
			history: func(b *builder) history.History {
				a := b.acquire(0, 0, 1, 20, 1)
				b.extend(a, 15, 16, 0, history.LockLost)
				b.acquire(1, 5, 30, 20, 2)
				return b.done(100)
			},
			verdict: VerdictOK,
		},
		{
			name: "a hold with no validity end lasts until lost",
			history: func(b *builder) history.History {
				a := b.acquire(0, 0, 1, 20, 1)
				b.h.Ops[a-1].ValidUntil = 0 // relies on Done() alone
				b.lost(a, 40)
				b.acquire(1, 5, 30, 20, 2)
				return b.done(100)
			},
			verdict: VerdictViolated,
			found:   Counts{MutualExclusion: 1},
		},
		{
			name: "hold ends at the lost signal",
			history: func(b *builder) history.History {
				a := b.acquire(0, 0, 1, 50, 1)
				b.lost(a, 10)
				b.acquire(1, 5, 12, 50, 2)
				return b.done(100)
			},
			verdict: VerdictOK,
		},
		{
			name: "write after validity overlaps, blamed on a client pause",
			history: func(b *builder) history.History {
				a := b.acquire(0, 0, 1, 20, 1)
				b.fault(fault.ClientPause, 0, 2, 40)
				c := b.acquire(1, 5, 25, 50, 2)
				b.write(c, "e2", 26, 27, history.OK, 1)
				b.write(a, "e1", 41, 42, history.Rejected, 0) // woke and wrote with token 1
				b.release(c, 50, 51)
				return b.done(100)
			},
			verdict:  VerdictOK,
			found:    Counts{MutualExclusion: 1},
			expected: Counts{MutualExclusion: 1},
			blamed:   []fault.Kind{fault.ClientPause},
			rejected: 1,
		},
		{
			name: "client pause of an uninvolved client explains nothing",
			history: func(b *builder) history.History {
				b.fault(fault.ClientPause, 2, 0, 40)
				b.acquire(0, 0, 1, 50, 1)
				b.acquire(1, 2, 3, 50, 2)
				return b.done(100)
			},
			verdict: VerdictViolated,
			found:   Counts{MutualExclusion: 1},
		},
		{
			name: "overlap after a restart without data",
			history: func(b *builder) history.History {
				b.acquire(0, 0, 1, 50, 1)
				b.fault(fault.RestartWithoutData, 0, 2, 5)
				b.acquire(1, 6, 7, 50, 2)
				return b.done(100)
			},
			verdict:  VerdictOK,
			found:    Counts{MutualExclusion: 1},
			expected: Counts{MutualExclusion: 1},
			blamed:   []fault.Kind{fault.RestartWithoutData},
		},
		{
			name: "overlap under an allowed fault is a violation",
			history: func(b *builder) history.History {
				b.fault(fault.Kill, 0, 0, 50)
				b.acquire(0, 0, 1, 50, 1)
				b.acquire(1, 6, 7, 50, 2)
				return b.done(100)
			},
			verdict: VerdictViolated,
			found:   Counts{MutualExclusion: 1},
			blamed:  []fault.Kind{fault.Kill},
		},
		{
			name: "token lower after the earlier acquire returned",
			history: func(b *builder) history.History {
				t := b.clean(3, 0, 5)
				b.cycle(0, t, 4, 8)
				return b.done(t + 10)
			},
			verdict: VerdictViolated,
			// The write with token 4 also went into the store after token 7.
			found: Counts{FencingOrder: 1, StaleWritesAccepted: 1},
		},
		{
			name: "equal token after the earlier acquire returned",
			history: func(b *builder) history.History {
				b.cycle(0, 0, 3, 0)
				b.cycle(1, 10, 3, 0)
				return b.done(20)
			},
			verdict: VerdictViolated,
			found:   Counts{FencingOrder: 1, DuplicateTokens: 1},
		},
		{
			name: "concurrent acquires may return tokens in any order",
			history: func(b *builder) history.History {
				a := b.acquire(0, 0, 5, 50, 2) // B started before A returned
				b.release(a, 6, 7)
				b.acquire(1, 4, 8, 50, 1)
				return b.done(100)
			},
			verdict: VerdictOK,
		},
		{
			name: "duplicate token on concurrent acquires",
			history: func(b *builder) history.History {
				a := b.acquire(0, 0, 5, 50, 2)
				b.release(a, 6, 7)
				b.acquire(1, 4, 8, 50, 2)
				return b.done(100)
			},
			verdict: VerdictViolated,
			found:   Counts{DuplicateTokens: 1},
		},
		{
			name: "fencing breaks after a restart without data: expected",
			history: func(b *builder) history.History {
				b.cycle(0, 0, 3, 1)
				b.fault(fault.RestartWithoutData, 1, 10, 12)
				b.cycle(1, 13, 3, 0) // store rejects nothing: equal tokens are admitted
				return b.done(30)
			},
			verdict:  VerdictOK,
			found:    Counts{FencingOrder: 1, DuplicateTokens: 1},
			expected: Counts{FencingOrder: 1, DuplicateTokens: 1},
		},
		{
			// Delayed restarts bring nodes back without their fence counters:
			// stacked before anything heals them, tokens can go back.
			name: "fencing breaks after delayed restarts: expected",
			history: func(b *builder) history.History {
				b.cycle(0, 0, 3, 1)
				b.fault(fault.DelayedRestart, 1, 10, 12)
				a := b.acquire(1, 13, 14, 50, 2)
				b.write(a, "e2", 15, 16, history.Rejected, 0) // the fenced store refuses it
				b.release(a, 18, 19)
				return b.done(30)
			},
			verdict:  VerdictOK,
			found:    Counts{FencingOrder: 1},
			expected: Counts{FencingOrder: 1},
			rejected: 1,
		},
		{
			name: "a kill keeps the counters: token order broken under it is a violation",
			history: func(b *builder) history.History {
				b.cycle(0, 0, 3, 1)
				b.fault(fault.Kill, 1, 10, 12)
				a := b.acquire(1, 13, 14, 50, 2)
				b.write(a, "e2", 15, 16, history.Rejected, 0)
				b.release(a, 18, 19)
				return b.done(30)
			},
			verdict:  VerdictViolated,
			found:    Counts{FencingOrder: 1},
			rejected: 1,
		},
		{
			name: "stale write accepted by store order",
			history: func(b *builder) history.History {
				a := b.acquire(0, 0, 1, 50, 1)
				c := b.acquire(1, 0.5, 1.5, 50, 2)
				b.write(c, "e2", 2, 10, history.OK, 1)
				b.write(a, "e1", 3, 9, history.OK, 2) // concurrent in real time
				b.release(a, 11, 12)
				b.release(c, 11, 12)
				return b.done(20)
			},
			verdict: VerdictViolated,
			found:   Counts{MutualExclusion: 1, StaleWritesAccepted: 1},
		},
		{
			name: "stale write accepted in real time",
			history: func(b *builder) history.History {
				a := b.acquire(0, 0, 1, 5, 1)
				c := b.acquire(1, 10, 11, 50, 2)
				b.write(c, "c", 12, 13, history.OK, 0)
				b.write(a, "a", 20, 21, history.OK, 0) // invoked after token 2 was written
				b.release(c, 30, 31)
				h := b.done(40)
				h.Final["r"] = []string{"a", "c"} // the final order alone looks fine
				return h
			},
			verdict: VerdictViolated,
			found:   Counts{MutualExclusion: 1, StaleWritesAccepted: 1},
		},
		{
			name: "failed write that landed out of order",
			history: func(b *builder) history.History {
				t := b.clean(2, 0, 1)
				a := b.acquire(0, t, t+1, 50, 3)
				b.write(a, "a", t+2, t+20, history.Failed, 0)
				b.release(a, t+21, t+22)
				h := b.done(t + 30)
				// The failed token 3 write landed, and token 2 after it.
				h.Final["r"] = []string{"e1", "a", "e2"}
				return h
			},
			verdict: VerdictViolated,
			found:   Counts{StaleWritesAccepted: 1},
		},
		{
			name: "stale write rejected",
			history: func(b *builder) history.History {
				t := b.clean(2, 0, 1)
				a := b.acquire(0, t, t+1, 5, 3)
				b.fault(fault.ClientPause, 0, t+2, t+13)
				c := b.acquire(1, t+10, t+11, 50, 4)
				b.write(c, "c", t+12, t+13, history.OK, 3)
				b.write(a, "a", t+14, t+15, history.Rejected, 0)
				b.release(c, t+16, t+17)
				return b.done(t + 20)
			},
			verdict:  VerdictOK,
			found:    Counts{MutualExclusion: 1},
			expected: Counts{MutualExclusion: 1},
			rejected: 1,
		},
		{
			name: "acknowledged write missing from the store",
			history: func(b *builder) history.History {
				h := b.done(b.clean(4, 0, 1))
				h.Final["r"] = slices.DeleteFunc(h.Final["r"], func(e string) bool { return e == "e3" })
				return h
			},
			verdict: VerdictViolated,
			found:   Counts{LostWrites: 1},
		},
		{
			name: "lost write blamed on a restart without data stays unexpected",
			history: func(b *builder) history.History {
				b.fault(fault.RestartWithoutData, 0, 0, 90)
				h := b.done(b.clean(4, 0, 1))
				h.Final["r"] = h.Final["r"][1:]
				return h
			},
			verdict: VerdictViolated,
			found:   Counts{LostWrites: 1},
			blamed:  []fault.Kind{fault.RestartWithoutData},
		},
		{
			name:    "empty history",
			history: func(b *builder) history.History { return b.h },
			verdict: VerdictUnknown,
		},
		{
			name: "too short",
			history: func(b *builder) history.History {
				b.cycle(0, 0, 1, 1)
				return b.done(10)
			},
			verdict: VerdictUnknown,
		},
		{
			name: "operation never completed",
			history: func(b *builder) history.History {
				t := b.clean(3, 0, 1)
				b.add(history.Op{Kind: history.KindAcquire, Client: 0, Key: "k", Invoke: ms(t)})
				return b.done(t + 10)
			},
			verdict: VerdictUnknown,
		},
		{
			name: "violation found in an incomplete history",
			history: func(b *builder) history.History {
				b.acquire(0, 0, 1, 50, 1)
				b.acquire(1, 2, 3, 50, 2)
				b.add(history.Op{Kind: history.KindAcquire, Client: 2, Key: "k", Invoke: ms(4)})
				return b.done(10)
			},
			verdict: VerdictViolated,
			found:   Counts{MutualExclusion: 1},
		},
		{
			name: "unreadable: a write names no acquire",
			history: func(b *builder) history.History {
				t := b.clean(3, 0, 1)
				b.add(history.Op{Kind: history.KindWrite, Client: 0, Key: "k", Hold: 3, Invoke: ms(t), Outcome: history.OK})
				return b.done(t + 10)
			},
			verdict: VerdictUnknown,
		},
		{
			name: "a fault that failed: unknown",
			history: func(b *builder) history.History {
				f := b.fault(fault.ClockSkew, 1, 5, 5)
				b.h.Ops[f-1].Outcome, b.h.Ops[f-1].Err = history.Failed, "libfaketime not found"
				return b.done(b.clean(9, 0, 1))
			},
			verdict: VerdictUnknown,
		},
		{
			name: "a fault that failed does not hide a violation",
			history: func(b *builder) history.History {
				f := b.fault(fault.Kill, 1, 5, 5)
				b.h.Ops[f-1].Outcome, b.h.Ops[f-1].Err = history.Failed, "no such process"
				t := b.clean(3, 0, 1)
				b.acquire(0, t, t+1, 50, 4)
				b.acquire(1, t+2, t+3, 50, 5)
				return b.done(t + 100)
			},
			verdict: VerdictViolated,
			found:   Counts{MutualExclusion: 1},
		},
		{
			name: "nothing expected when told so",
			history: func(b *builder) history.History {
				b.acquire(0, 0, 1, 50, 1)
				b.fault(fault.RestartWithoutData, 0, 2, 5)
				b.acquire(1, 6, 7, 50, 2)
				return b.done(100)
			},
			opts:    CheckOptions{Expected: map[Property][]fault.Kind{}},
			verdict: VerdictViolated,
			found:   Counts{MutualExclusion: 1},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := Check(tc.history(newBuilder(5)), tc.opts)
			if res.Verdict != tc.verdict || res.Found != tc.found || res.Expected != tc.expected {
				t.Fatalf("verdict %s (%s), found %+v, expected %+v; want %s, %+v, %+v\n%v",
					res.Verdict, res.Reason, res.Found, res.Expected, tc.verdict, tc.found, tc.expected, res.Violations)
			}
			if tc.blamed != nil && !slices.Equal(res.Violations[0].Faults, tc.blamed) {
				t.Errorf("first violation blamed on %v, want %v", res.Violations[0].Faults, tc.blamed)
			}
			for _, f := range res.Faults {
				if f.Err != "" {
					t.Errorf("failed fault %+v among the injected ones", f)
				}
			}
			if failed := slices.ContainsFunc(tc.history(newBuilder(5)).Ops, func(op history.Op) bool {
				return op.Kind == history.KindFault && op.Outcome == history.Failed
			}); failed != (len(res.FailedFaults) > 0) {
				t.Errorf("FailedFaults = %+v", res.FailedFaults)
			}
			if res.StaleWritesRejected != tc.rejected {
				t.Errorf("StaleWritesRejected = %d, want %d", res.StaleWritesRejected, tc.rejected)
			}
			if tc.verdict != VerdictUnknown && res.StoreCorrect != (tc.found.StaleWritesAccepted == 0 && tc.found.LostWrites == 0) {
				t.Errorf("StoreCorrect = %v with %+v", res.StoreCorrect, tc.found)
			}
		})
	}
}
