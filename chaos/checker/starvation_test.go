package checker

import (
	"slices"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/history"
)

// TestStarvation plants a starved client in histories and checks that the
// verdict counts exactly the waits that are starvation: a client that keeps
// failing to get a key that others keep getting, with a quorum up, past the
// derived threshold.
//
// In each history clients 0 to 2 hand "k" round in clean 10 ms cycles (leases
// of 50 ms, holds of 7 ms, releases of 1 ms: a stall threshold of 106 ms, a
// floor of 113 ms), 100 of them in a second, while client 3 tries for it.
func TestStarvation(t *testing.T) {
	for _, tc := range []struct {
		name     string
		starving func(b *builder) // client 3's attempts, after the second of cycles
		verdict  Verdict
		starved  int
		expected int
		wait     time.Duration // the worst wait
		others   int
	}{
		{
			// Ten failed attempts of 100 ms each: a mean wait per grant of
			// (100*1 + 1000)/100 = 11 ms, a threshold of max(113, 110) ms.
			name: "planted starvation",
			starving: func(b *builder) {
				for i := range 10 {
					b.failedAcquire(3, float64(i*100), float64(i*100+100))
				}
			},
			verdict: VerdictViolated, starved: 1, wait: ms(1000), others: 100,
		},
		{
			// "long" is acquired once with a lease of an hour: k's
			// threshold stays its own.
			name: "another key's long lease does not excuse it",
			starving: func(b *builder) {
				b.add(history.Op{Kind: history.KindAcquire, Client: 4, Key: "long", Invoke: 0, Complete: ms(1),
					Outcome: history.OK, Token: 1, ValidUntil: time.Hour})
				for i := range 10 {
					b.failedAcquire(3, float64(i*100), float64(i*100+100))
				}
			},
			verdict: VerdictViolated, starved: 1, wait: ms(1000), others: 100,
		},
		{
			// Client 3 takes every fourth turn, after 30 ms of trying.
			name: "a client served in turn is not starved",
			starving: func(b *builder) {
				b.h.Ops = nil // instead of the cycles of clients 0 to 2
				for i := range 100 {
					t := float64(i * 10)
					if i%4 == 3 {
						b.failedAcquire(3, t-30, t)
					}
					b.cycle(i%4, t, uint64(i+1), uint64(i+1))
				}
			},
			verdict: VerdictOK, wait: ms(31), others: 3,
		},
		{
			// Time on another key is not time waiting for "k": client 3 waits
			// 10 ms for "k", then 90 ms for "other", which client 4 holds
			// throughout, ten times.
			name: "waits for other keys do not add up",
			starving: func(b *builder) {
				b.add(history.Op{Kind: history.KindAcquire, Client: 4, Key: "other", Invoke: 0, Complete: ms(1),
					Outcome: history.OK, Token: 1, ValidUntil: ms(2000)})
				for i := range 10 {
					t := float64(i * 100)
					b.failedAcquire(3, t, t+10)
					b.add(history.Op{Kind: history.KindAcquire, Client: 3, Key: "other", Invoke: ms(t + 10), Complete: ms(t + 100),
						Outcome: history.Failed, Err: "not acquired"})
				}
			},
			verdict: VerdictOK, wait: ms(100), others: 10,
		},
		{
			name: "a majority down is not starvation",
			starving: func(b *builder) {
				for n := range 3 {
					b.fault(fault.Partition, n, 50, 1000)
				}
				for i := range 10 {
					b.failedAcquire(3, float64(i*100), float64(i*100+100))
				}
			},
			verdict: VerdictOK, wait: ms(50), others: 5,
		},
		{
			name: "a node clock jump explains it",
			starving: func(b *builder) {
				b.fault(fault.ClockSkew, 4, 200, 300)
				for i := range 10 {
					b.failedAcquire(3, float64(i*100), float64(i*100+100))
				}
			},
			verdict: VerdictOK, starved: 1, expected: 1, wait: ms(1000), others: 100,
		},
		{
			name: "another client's pause does not explain it",
			starving: func(b *builder) {
				b.fault(fault.ClientPause, 0, 200, 300)
				for i := range 10 {
					b.failedAcquire(3, float64(i*100), float64(i*100+100))
				}
			},
			verdict: VerdictViolated, starved: 1, wait: ms(1000), others: 100,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuilder(5)
			b.clean(100, 0, 1)
			tc.starving(b)
			res := Check(b.done(1000), CheckOptions{})
			s := res.Starvation
			if res.Verdict != tc.verdict || res.Found.Starvation != tc.starved ||
				res.Expected.Starvation != tc.expected || s.Wait != tc.wait || s.Others != tc.others {
				t.Fatalf("verdict %s (%s), %d starved (%d expected), worst wait %v (others %d); want %s, %d (%d), %v (%d)\n%+v",
					res.Verdict, res.Reason, res.Found.Starvation, res.Expected.Starvation, s.Wait, s.Others,
					tc.verdict, tc.starved, tc.expected, tc.wait, tc.others, s)
			}
			if s.OK != (tc.starved == 0) || !s.Checked || !s.Judged {
				t.Errorf("Starvation %+v with %d starved", s, tc.starved)
			}
			if tc.starved > 0 {
				if s.Client != 3 || s.Key != "k" || s.Threshold != ms(113) {
					t.Errorf("worst wait by client %d for %q, threshold %v; want client 3, \"k\", 113ms", s.Client, s.Key, s.Threshold)
				}
				if res.Found.Total() != tc.starved {
					t.Errorf("other violations: %+v", res.Violations)
				}
				v := res.Violations[0]
				if !slices.Equal(v.Clients, []int{3}) || v.Start != 0 || v.End != ms(1000) {
					t.Errorf("violation %+v; want client 3 from 0 to 1s", v)
				}
			}
		})
	}
}

func TestStarvationThreshold(t *testing.T) {
	starved := func() history.History {
		b := newBuilder(5)
		b.clean(100, 0, 1)
		for i := range 10 {
			b.failedAcquire(3, float64(i*100), float64(i*100+100))
		}
		return b.done(1000)
	}
	s := Check(starved(), CheckOptions{StarvationThreshold: 2 * time.Second}).Starvation
	if !s.OK || s.Threshold != 2*time.Second || s.Wait != time.Second {
		t.Errorf("with a threshold of 2s given: %+v", s)
	}
	h := starved()
	for i := range h.Ops {
		h.Ops[i].ValidUntil = 0
	}
	s = Check(h, CheckOptions{}).Starvation
	if s.Judged || !s.OK || s.Threshold != 0 || s.Wait != time.Second {
		t.Errorf("no validity ends: %+v; want measured, not judged", s)
	}
}
