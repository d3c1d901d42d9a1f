package history

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/clock"
)

func TestRecorderStamps(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	rec := NewRecorder(clk, 3)
	step := func() { clk.Advance(time.Millisecond) }

	a := rec.Acquire(0, "k")
	step()
	f := rec.Acquire(1, "k")
	step()
	h := a.OK(7, "v7", 30*time.Millisecond)
	f.Fail(errors.New("not acquired"))
	w := rec.Write(h, "r", "e1")
	step()
	w.Accepted(1)
	s := rec.Write(h, "r", "e2")
	s.Rejected()
	pause := rec.Fault(fault.ClientPause, 0)
	step()
	rec.Lost(h)
	pause.End()
	node := rec.Fault(fault.Kill, 2)
	r := rec.Release(h)
	step()
	r.LockLost()
	rec.FinalStore("r", []string{"e1"})
	_ = node // never ends: open until the end

	want := History{
		Nodes: 3,
		Ops: []Op{
			{ID: 1, Kind: KindAcquire, Key: "k", Invoke: 0, Complete: ms(2), Outcome: OK, Token: 7, Value: "v7", ValidUntil: ms(32)},
			{ID: 2, Kind: KindAcquire, Client: 1, Key: "k", Invoke: ms(1), Complete: ms(2), Outcome: Failed, Err: "not acquired"},
			{ID: 3, Kind: KindWrite, Key: "k", Hold: 1, Token: 7, Value: "v7", Resource: "r", Entry: "e1", Invoke: ms(2), Complete: ms(3), Outcome: OK, Seq: 1},
			{ID: 4, Kind: KindWrite, Key: "k", Hold: 1, Token: 7, Value: "v7", Resource: "r", Entry: "e2", Invoke: ms(3), Complete: ms(3), Outcome: Rejected},
			{ID: 5, Kind: KindFault, Fault: fault.ClientPause, Invoke: ms(3), Complete: ms(4), Outcome: OK},
			{ID: 6, Kind: KindLost, Key: "k", Hold: 1, Token: 7, Value: "v7", Invoke: ms(4), Complete: ms(4), Outcome: OK},
			{ID: 7, Kind: KindFault, Fault: fault.Kill, Node: 2, Invoke: ms(4)},
			{ID: 8, Kind: KindRelease, Key: "k", Hold: 1, Token: 7, Value: "v7", Invoke: ms(4), Complete: ms(5), Outcome: LockLost},
		},
		Final: map[string][]string{"r": {"e1"}},
		End:   ms(5),
	}
	got := rec.History()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("history:\n got %+v\nwant %+v", got, want)
	}
	wantStats := Stats{Elapsed: ms(5), Acquisitions: 1, AcquireFailures: 1, Faults: 2, Writes: 1, StaleRejected: 1}
	if st := rec.Stats(); st != wantStats {
		t.Errorf("stats %+v, want %+v", st, wantStats)
	}
	faults := Faults(got)
	if !faults[1].Open || faults[1].End != ms(5) {
		t.Errorf("open fault %+v: want open until the end", faults[1])
	}

	var buf bytes.Buffer
	if err := WriteJSONL(&buf, got); err != nil {
		t.Fatal(err)
	}
	back, err := ReadJSONL(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, got) {
		t.Fatalf("JSON Lines round trip:\n got %+v\nwant %+v", back, got)
	}
}

func TestRecorderValidity(t *testing.T) {
	for _, tc := range []struct {
		name     string
		validFor time.Duration
		extend   func(ExtendCall)
		want     []time.Duration // ValidUntil of the acquire and the extend
	}{
		{"acquired", 30 * time.Millisecond, nil, []time.Duration{ms(32)}},
		{"no validity end", 0, nil, []time.Duration{0}},
		{"extended", 30 * time.Millisecond, func(c ExtendCall) { c.OK(50 * time.Millisecond) }, []time.Duration{ms(32), ms(54)}},
		{"extension lost", 30 * time.Millisecond, func(c ExtendCall) { c.LockLost() }, []time.Duration{ms(32), 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewFake(time.Unix(0, 0))
			rec := NewRecorder(clk, 1)
			a := rec.Acquire(0, "k")
			clk.Advance(ms(2))
			h := a.OK(1, "v", tc.validFor)
			if tc.extend != nil {
				e := rec.Extend(h)
				clk.Advance(ms(2))
				tc.extend(e)
			}
			var got []time.Duration
			for _, op := range rec.History().Ops {
				got = append(got, op.ValidUntil)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("ValidUntil %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRecorderPanicsOnSecondCompletion(t *testing.T) {
	rec := NewRecorder(clock.NewFake(time.Unix(0, 0)), 1)
	w := rec.Write(rec.Acquire(0, "k").OK(1, "v", time.Second), "r", "e")
	w.Accepted(1)
	defer func() {
		if recover() == nil {
			t.Error("second completion did not panic")
		}
	}()
	w.Rejected()
}

// TestRecorderConcurrent records many clients at once on the real clock,
// under a real in-process lock and under none, and checks what was recorded.
func TestRecorderConcurrent(t *testing.T) {
	const clients, rounds = 8, 50
	for _, tc := range []struct {
		name    string
		locked  bool
		verdict Verdict
	}{
		{"mutex", true, VerdictOK},
		{"no lock", false, VerdictViolated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := NewRecorder(clock.Real(), 1)
			var (
				mu    sync.Mutex // the lock under test, when locked
				state sync.Mutex // protects token, log
				token uint64
				log   []string
			)
			// Without a lock, every client holds before any releases. With
			// one, the first holder releases only once every client is
			// acquiring: a handover for certain. Else a loaded machine may
			// run the goroutines one after the other, each through its
			// rounds before the next starts, and nobody ever waits (seen
			// in CI: no handover at all).
			var holding, invoked sync.WaitGroup
			holding.Add(clients)
			invoked.Add(clients)
			var wg sync.WaitGroup
			for c := range clients {
				wg.Go(func() {
					for i := range rounds {
						a := rec.Acquire(c, "k")
						if i == 0 {
							invoked.Done()
						}
						if tc.locked {
							mu.Lock()
						}
						state.Lock()
						token++
						tok := token
						state.Unlock()
						h := a.OK(tok, fmt.Sprintf("v%d", tok), time.Hour)
						if !tc.locked && i == 0 {
							holding.Done()
							holding.Wait()
						}
						w := rec.Write(h, "r", fmt.Sprintf("c%d-%d", c, i))
						state.Lock()
						log = append(log, fmt.Sprintf("c%d-%d", c, i))
						seq := uint64(len(log))
						state.Unlock()
						w.Accepted(seq)
						if tc.locked && i == 0 {
							invoked.Wait()
						}
						r := rec.Release(h)
						if tc.locked {
							mu.Unlock()
						}
						r.OK()
					}
				})
			}
			wg.Wait()
			rec.FinalStore("r", log)
			// Holds here last microseconds: count any overlap at all. A
			// release here is a Go mutex's Unlock, microseconds, while a
			// goroutine that a loaded machine's scheduler holds back takes
			// the mutex next many times that: the handover default (five
			// release latencies, made for round trips to Redis) would judge
			// the scheduler. The handovers are still measured; their
			// judgement has its own tests (handover_test.go).
			res := Check(rec.History(), CheckOptions{HandoverThreshold: time.Hour})
			if res.Verdict != tc.verdict || res.Acquisitions != clients*rounds || res.Writes != clients*rounds {
				t.Fatalf("verdict %s (%s), %d acquisitions, %d writes", res.Verdict, res.Reason, res.Acquisitions, res.Writes)
			}
			if tc.locked && (!res.Handover.Checked || res.Handover.Samples == 0) {
				t.Errorf("no handover measured among %d clients contending: %+v", clients, res.Handover)
			}
			if !tc.locked && res.Found.MutualExclusion < clients-1 {
				t.Errorf("found %d overlaps, want at least %d", res.Found.MutualExclusion, clients-1)
			}
		})
	}
}

func TestRecorderFaultAt(t *testing.T) {
	fake := clock.NewFake(time.Unix(100, 0))
	r := NewRecorder(fake, 3)
	start := fake.Now().Add(2 * time.Second)
	r.FaultAt(fault.Pause, 1, start, start.Add(time.Second), nil)
	r.FaultAt(fault.ClientPause, 4, start, start.Add(-time.Second), nil) // an end before the start is clamped
	h := r.History()
	fs := Faults(h)
	if len(fs) != 2 || r.Stats().Faults != 2 {
		t.Fatalf("faults %+v, stats %+v", fs, r.Stats())
	}
	if fs[0].Kind != fault.Pause || fs[0].Node != 1 || fs[0].Start != 2*time.Second || fs[0].End != 3*time.Second || fs[0].Open {
		t.Fatalf("node fault %+v", fs[0])
	}
	if fs[1].Client != 4 || fs[1].End != fs[1].Start {
		t.Fatalf("client fault %+v", fs[1])
	}
}
