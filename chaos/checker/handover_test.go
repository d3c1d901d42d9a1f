package checker

import (
	"slices"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/history"
)

// handovers adds n handovers of "k" between clients 0 and 1 from t ms: the
// holder releases 4 ms into its hold (the release takes 1 ms) while the other
// client, which asked 1 ms into the hold, waits; that client's acquire
// returns gap ms after the release did (gap may be negative: before it). It
// returns the time after them.
func (b *builder) handovers(n int, t, gap float64) float64 {
	holder := 0
	hold := b.acquire(holder, t, t+1, 1000, uint64(len(b.h.Ops)+1))
	t++
	for range n {
		b.release(hold, t+4, t+5)
		holder = 1 - holder
		hold = b.acquire(holder, t+1, t+5+max(gap, 0.5), 1000, uint64(len(b.h.Ops)+1))
		if gap < 0 {
			b.h.Ops[hold-1].Complete = ms(t + 5 + gap)
		}
		t = max(t+5+gap, t+4.5)
	}
	b.release(hold, t+4, t+5)
	return t + 5
}

// TestHandover plants slow and fast handovers and checks that only a slow
// median, measured on enough handovers with every node up, is a violation.
// Releases take 1 ms: a threshold of 5 ms.
func TestHandover(t *testing.T) {
	for _, tc := range []struct {
		name     string
		build    func(b *builder) float64
		verdict  Verdict
		judged   bool
		samples  int
		median   time.Duration
		found    int
		expected int
		faults   []fault.Kind // blamed on the violation
	}{
		{
			name:    "planted slow handover",
			build:   func(b *builder) float64 { return b.handovers(30, 0, 40) },
			verdict: VerdictViolated, judged: true, samples: 30, median: ms(40), found: 1,
		},
		{
			name:    "fast handovers",
			build:   func(b *builder) float64 { return b.handovers(30, 0, 2) },
			verdict: VerdictOK, judged: true, samples: 30, median: ms(2),
		},
		{
			// The waiter gets the key before the releaser hears back.
			name:    "waiters woken before the release returned",
			build:   func(b *builder) float64 { return b.handovers(30, 0, -0.4) },
			verdict: VerdictOK, judged: true, samples: 30, median: 0,
		},
		{
			name:    "too few handovers to judge",
			build:   func(b *builder) float64 { return b.handovers(handoverSamples-1, 0, 40) },
			verdict: VerdictOK, samples: handoverSamples - 1, median: ms(40),
		},
		{
			name: "slow handovers with a node down are not measured",
			build: func(b *builder) float64 {
				t := b.handovers(30, 0, 2)
				b.fault(fault.Kill, 2, t, t+2000)
				return b.handovers(30, t+1, 40)
			},
			verdict: VerdictOK, judged: true, samples: 30, median: ms(2),
		},
		{
			name: "slow handovers under latency are not measured",
			build: func(b *builder) float64 {
				t := b.handovers(30, 0, 2)
				b.fault(fault.Latency, 4, t, t+2000)
				return b.handovers(30, t+1, 40)
			},
			verdict: VerdictOK, judged: true, samples: 30, median: ms(2),
		},
		{
			// A clock jump does not delay an announced release: measured,
			// blamed, not expected.
			name: "a node clock jump does not explain it",
			build: func(b *builder) float64 {
				b.fault(fault.ClockSkew, 3, 0, 2000)
				return b.handovers(30, 0, 40)
			},
			verdict: VerdictViolated, judged: true, samples: 30, median: ms(40), found: 1,
			faults: []fault.Kind{fault.ClockSkew},
		},
		{
			name: "a waiter whose clock runs slow explains it",
			build: func(b *builder) float64 {
				b.fault(fault.ClientClockSkew, 1, 0, 2000)
				b.fault(fault.ClientClockSkew, 0, 0, 2000)
				return b.handovers(30, 0, 40)
			},
			verdict: VerdictOK, judged: true, samples: 30, median: ms(40), found: 1, expected: 1,
			faults: []fault.Kind{fault.ClientClockSkew},
		},
		{
			// Client 2's releases find nobody waiting: not handovers.
			name: "releases nobody waited for are not handovers",
			build: func(b *builder) float64 {
				t := b.handovers(handoverSamples, 0, 2)
				for i := range 30 {
					a := b.add(history.Op{Kind: history.KindAcquire, Client: 2, Key: "k", Invoke: ms(t + 1), Complete: ms(t + 2),
						Outcome: history.OK, Token: uint64(100 + i), ValidUntil: ms(t + 1000)})
					b.release(a, t+3, t+4)
					t += 50
				}
				return t
			},
			verdict: VerdictOK, judged: true, samples: handoverSamples, median: ms(2),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuilder(5)
			end := tc.build(b)
			res := Check(b.done(end), CheckOptions{})
			ho := res.Handover
			if res.Verdict != tc.verdict || ho.Judged != tc.judged || ho.Samples != tc.samples || ho.Median != tc.median ||
				res.Found.Handover != tc.found || res.Expected.Handover != tc.expected {
				t.Fatalf("verdict %s (%s), handover %+v, %d found (%d expected); want %s, judged %v, %d samples, median %v, %d found (%d expected)",
					res.Verdict, res.Reason, ho, res.Found.Handover, res.Expected.Handover,
					tc.verdict, tc.judged, tc.samples, tc.median, tc.found, tc.expected)
			}
			if res.Found.Total() != tc.found {
				t.Errorf("other violations: %+v", res.Violations)
			}
			if !ho.Checked || ho.OK != (tc.found == 0) || ho.Key != "k" {
				t.Errorf("handover %+v", ho)
			}
			if want := ms(5); tc.judged && ho.Threshold != want {
				t.Errorf("threshold %v; want 5 release latencies, %v", ho.Threshold, want)
			}
			if tc.found == 0 {
				return
			}
			v := res.Violations[0]
			rel, acq := b.h.Ops[v.Ops[0]-1], b.h.Ops[v.Ops[1]-1]
			if rel.Kind != history.KindRelease || acq.Kind != history.KindAcquire || acq.Complete-rel.Complete != tc.median ||
				v.Start != rel.Complete || v.End != acq.Complete || v.Property != SlowHandover {
				t.Errorf("violation %+v does not show a median handover (release %+v, acquire %+v)", v, rel, acq)
			}
			if !slices.Equal(v.Faults, tc.faults) {
				t.Errorf("blamed %v; want %v", v.Faults, tc.faults)
			}
		})
	}
}

func TestHandoverThreshold(t *testing.T) {
	b := newBuilder(5)
	h := b.done(b.handovers(30, 0, 40))
	ho := Check(h, CheckOptions{HandoverThreshold: 50 * time.Millisecond}).Handover
	if !ho.OK || !ho.Judged || ho.Threshold != 50*time.Millisecond || ho.Median != ms(40) {
		t.Errorf("with a threshold of 50ms given: %+v", ho)
	}
	h.Nodes = 0 // handovers do not need the node count
	if ho := Check(h, CheckOptions{}).Handover; ho.OK || !ho.Judged {
		t.Errorf("without a node count: %+v", ho)
	}
	if ho := Check(history.History{}, CheckOptions{}).Handover; ho.Checked || ho.Judged || !ho.OK {
		t.Errorf("empty history: %+v", ho)
	}
}

// TestHandoverWaited checks which acquires make a release a handover: another
// client's, in flight at some moment of the release, however long before it
// was called; never the releaser's own.
func TestHandoverWaited(t *testing.T) {
	b := newBuilder(5)
	hold := b.acquire(0, 0, 1, 5000, 1)
	b.failedAcquire(2, 2, 3)          // over before the release
	b.failedAcquire(0, 999.5, 1000.2) // the releaser's own
	rel := b.release(hold, 1000, 1001)
	b.acquire(3, 1500, 1600, 5000, 2) // asked after the release returned
	for _, tc := range []struct {
		name  string
		extra func(b *builder)
		want  bool
	}{
		{"nobody else waited", func(*builder) {}, false},
		{"asked long before", func(b *builder) { b.failedAcquire(1, 5, 1000.5) }, true},
		{"asked during it", func(b *builder) { b.failedAcquire(1, 1000.5, 1200) }, true},
		{"never answered", func(b *builder) { b.add(history.Op{Kind: history.KindAcquire, Client: 1, Key: "k", Invoke: ms(500)}) }, true},
		{"over just before", func(b *builder) { b.failedAcquire(1, 5, 999) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &builder{h: b.h}
			c.h.Ops = slices.Clone(b.h.Ops)
			tc.extra(c)
			h := c.done(3000)
			if got := len(handoffs(h, nil)) == 1; got != tc.want {
				t.Errorf("release %d a handover: %v, want %v", rel, got, tc.want)
			}
		})
	}
}
