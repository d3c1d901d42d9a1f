package recorder_test

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/chaos/checker"
	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/history"
	"github.com/fencedlock/fencedlock/chaos/recorder"
	"github.com/fencedlock/fencedlock/clock"
)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// Every kind of call lands in the memory history as the op it records,
// stamped when it was made; the counts follow; the history round-trips
// through JSON Lines.
func TestMemoryStamps(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	mem := recorder.NewMemory()
	rec := recorder.New(mem, recorder.WithClock(clk), recorder.WithNodes(3))
	step := func() { clk.Advance(time.Millisecond) }
	c0, c1 := rec.Client("client 0"), rec.Client("client 1")

	a := c0.Acquire("k")
	step()
	f := c1.Acquire("k")
	step()
	h := a.Value("v7").OK(7, clk.Now().Add(ms(30)))
	f.Fail(errors.New("not acquired"))
	w := h.Write("r", "e1").Seq(1)
	step()
	w.Accepted()
	s := h.Write("r", "e2")
	s.Rejected()
	pause := c0.Fault(fault.ClientPause)
	step()
	h.Lost()
	pause.End()
	node := rec.NodeFault(fault.Kill, 2)
	r := h.Release()
	step()
	r.LockLost()
	rec.Store("r", []string{"e1"})
	_ = node // never ends: open until the end

	want := history.History{
		Nodes:   3,
		Clients: []string{"client 0", "client 1"},
		Ops: []history.Op{
			{ID: 1, Kind: history.KindAcquire, Key: "k", Invoke: 0, Complete: ms(2), Outcome: history.OK, Token: 7, Value: "v7", ValidUntil: ms(32)},
			{ID: 2, Kind: history.KindAcquire, Client: 1, Key: "k", Invoke: ms(1), Complete: ms(2), Outcome: history.Failed, Err: "not acquired"},
			{ID: 3, Kind: history.KindWrite, Key: "k", Hold: 1, Token: 7, Value: "v7", Resource: "r", Entry: "e1", Invoke: ms(2), Complete: ms(3), Outcome: history.OK, Seq: 1},
			{ID: 4, Kind: history.KindWrite, Key: "k", Hold: 1, Token: 7, Value: "v7", Resource: "r", Entry: "e2", Invoke: ms(3), Complete: ms(3), Outcome: history.Rejected},
			{ID: 5, Kind: history.KindFault, Fault: fault.ClientPause, Invoke: ms(3), Complete: ms(4), Outcome: history.OK},
			{ID: 6, Kind: history.KindLost, Key: "k", Hold: 1, Token: 7, Value: "v7", Invoke: ms(4), Complete: ms(4), Outcome: history.OK},
			{ID: 7, Kind: history.KindFault, Fault: fault.Kill, Node: 2, Invoke: ms(4)},
			{ID: 8, Kind: history.KindRelease, Key: "k", Hold: 1, Token: 7, Value: "v7", Invoke: ms(4), Complete: ms(5), Outcome: history.LockLost},
		},
		Final: map[string][]string{"r": {"e1"}},
		End:   ms(5),
	}
	got := mem.History()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("history:\n got %+v\nwant %+v", got, want)
	}
	wantStats := recorder.Stats{Elapsed: ms(5), Acquisitions: 1, AcquireFailures: 1, Faults: 2, Writes: 1, StaleRejected: 1}
	if st := mem.Stats(); st != wantStats {
		t.Errorf("stats %+v, want %+v", st, wantStats)
	}
	faults := checker.Faults(got)
	if !faults[1].Open || faults[1].End != ms(5) {
		t.Errorf("open fault %+v: want open until the end", faults[1])
	}

	var buf bytes.Buffer
	if err := history.WriteJSONL(&buf, got); err != nil {
		t.Fatal(err)
	}
	back, err := history.ReadJSONL(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, got) {
		t.Fatalf("JSON Lines round trip:\n got %+v\nwant %+v", back, got)
	}
}

func TestMemoryValidity(t *testing.T) {
	for _, tc := range []struct {
		name     string
		validFor time.Duration // 0: no validity end
		extend   func(c *recorder.ExtendCall, now time.Time)
		want     []time.Duration // ValidUntil of the acquire and the extend
	}{
		{"acquired", ms(30), nil, []time.Duration{ms(32)}},
		{"no validity end", 0, nil, []time.Duration{0}},
		{"extended", ms(30), func(c *recorder.ExtendCall, now time.Time) { c.OK(now.Add(ms(50))) }, []time.Duration{ms(32), ms(54)}},
		{"extension lost", ms(30), func(c *recorder.ExtendCall, _ time.Time) { c.LockLost() }, []time.Duration{ms(32), 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewFake(time.Unix(0, 0))
			mem := recorder.NewMemory()
			rec := recorder.New(mem, recorder.WithClock(clk), recorder.WithNodes(1))
			a := rec.Client("c").Acquire("k")
			clk.Advance(ms(2))
			var until time.Time
			if tc.validFor != 0 {
				until = clk.Now().Add(tc.validFor)
			}
			h := a.OK(1, until)
			if tc.extend != nil {
				e := h.Extend()
				clk.Advance(ms(2))
				tc.extend(e, clk.Now())
			}
			var got []time.Duration
			for _, op := range mem.History().Ops {
				got = append(got, op.ValidUntil)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("ValidUntil %v, want %v", got, tc.want)
			}
		})
	}
}

// An extend records the re-creates given before its outcome, whatever the
// outcome; none given, or an empty list, records none; one given after the
// outcome records nothing.
func TestMemoryReacquired(t *testing.T) {
	mem := recorder.NewMemory()
	rec := recorder.New(mem, recorder.WithNodes(3))
	h := rec.Client("c").Acquire("k").OK(1, time.Now().Add(time.Second))
	h.Extend().Reacquired([]int{2, 0}).OK(time.Now().Add(time.Second))
	h.Extend().Reacquired(nil).OK(time.Now().Add(time.Second))
	h.Extend().Reacquired([]int{1}).LockLost()
	e := h.Extend()
	e.Fail(errors.New("timeout"))
	e.Reacquired([]int{1})
	var got [][]int
	for _, op := range mem.History().Ops[1:] {
		got = append(got, op.Reacquired)
	}
	if !reflect.DeepEqual(got, [][]int{{2, 0}, nil, {1}, nil}) {
		t.Fatalf("reacquired %v", got)
	}
	if err := mem.History().Validate(); err != nil {
		t.Fatal(err)
	}
}

// A call completes once: a second completion, a datum given after the
// outcome, and any call after Close record nothing.
func TestRecorderCompletesOnce(t *testing.T) {
	mem := recorder.NewMemory()
	rec := recorder.New(mem, recorder.WithClock(clock.NewFake(time.Unix(0, 0))))
	c := rec.Client("c")
	w := c.Acquire("k").OK(1, time.Time{}).Write("r", "e")
	w.Accepted()
	w.Rejected()
	w.Seq(3)
	open := c.Acquire("k")
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	open.Fail(errors.New("after Close"))
	c.Acquire("k").Fail(errors.New("after Close"))
	rec.NodeFaultAt(fault.Kill, 0, time.Unix(0, 0), time.Unix(1, 0), nil)
	rec.Store("r", []string{"e"})

	h := mem.History()
	if len(h.Ops) != 3 || h.Ops[1].Outcome != history.OK || h.Ops[1].Seq != 0 || h.Ops[2].Outcome != history.Pending || h.Final != nil {
		t.Fatalf("ops %+v, final %v: want the acquire, the write accepted, the acquire open at Close, no store", h.Ops, h.Final)
	}
}

// Naming a client again gives the same client; names number clients in
// the order they are first named.
func TestRecorderClients(t *testing.T) {
	mem := recorder.NewMemory()
	rec := recorder.New(mem)
	for _, name := range []string{"b", "a", "b"} {
		rec.Client(name).Acquire("k").Fail(errors.New("no"))
	}
	h := mem.History()
	var clients []int
	for _, op := range h.Ops {
		clients = append(clients, op.Client)
	}
	if !slices.Equal(h.Clients, []string{"b", "a"}) || !slices.Equal(clients, []int{0, 1, 0}) {
		t.Fatalf("clients %v, ops by %v; want [b a], [0 1 0]", h.Clients, clients)
	}
	defer func() {
		if recover() == nil {
			t.Error("an empty client name did not panic")
		}
	}()
	rec.Client("")
}

// TestMemoryConcurrent records many clients at once on the real clock,
// under a real in-process lock and under none, and checks what was recorded.
func TestMemoryConcurrent(t *testing.T) {
	const clients, rounds = 8, 50
	for _, tc := range []struct {
		name    string
		locked  bool
		verdict checker.Verdict
	}{
		{"mutex", true, checker.VerdictOK},
		{"no lock", false, checker.VerdictViolated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := recorder.NewMemory()
			rec := recorder.New(mem, recorder.WithNodes(1))
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
				client := rec.Client(fmt.Sprint("client ", c))
				wg.Go(func() {
					for i := range rounds {
						a := client.Acquire("k")
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
						h := a.Value(fmt.Sprintf("v%d", tok)).OK(tok, time.Now().Add(time.Hour))
						if !tc.locked && i == 0 {
							holding.Done()
							holding.Wait()
						}
						entry := fmt.Sprintf("c%d-%d", c, i)
						w := h.Write("r", entry)
						state.Lock()
						log = append(log, entry)
						seq := uint64(len(log))
						state.Unlock()
						w.Seq(seq).Accepted()
						if tc.locked && i == 0 {
							invoked.Wait()
						}
						r := h.Release()
						if tc.locked {
							mu.Unlock()
						}
						r.OK()
					}
				})
			}
			wg.Wait()
			rec.Store("r", log)
			// Holds here last microseconds: count any overlap at all. A
			// release here is a Go mutex's Unlock, microseconds, while a
			// goroutine that a loaded machine's scheduler holds back takes
			// the mutex next many times that: the handover default (five
			// release latencies, made for round trips to Redis) would judge
			// the scheduler. The handovers are still measured; their
			// judgement has its own tests (chaos/history/handover_test.go).
			res := checker.Check(mem.History(), checker.CheckOptions{HandoverThreshold: time.Hour})
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

// A fault recorded when it ended lands where it happened, after the ops
// recorded meanwhile.
func TestMemoryFaultAt(t *testing.T) {
	fake := clock.NewFake(time.Unix(100, 0))
	mem := recorder.NewMemory()
	rec := recorder.New(mem, recorder.WithClock(fake), recorder.WithNodes(3))
	start := fake.Now().Add(2 * time.Second)
	rec.NodeFaultAt(fault.Pause, 1, start, start.Add(time.Second), nil)
	rec.Client("c").FaultAt(fault.ClientPause, start, start.Add(-time.Second), errors.New("boom")) // an end before the start is clamped
	fs := checker.Faults(mem.History())
	if len(fs) != 2 || mem.Stats().Faults != 2 {
		t.Fatalf("faults %+v, stats %+v", fs, mem.Stats())
	}
	if fs[0].Kind != fault.Pause || fs[0].Node != 1 || fs[0].Start != 2*time.Second || fs[0].End != 3*time.Second || fs[0].Open || fs[0].Err != "" {
		t.Fatalf("node fault %+v", fs[0])
	}
	if fs[1].Client != 0 || fs[1].End != fs[1].Start || fs[1].Err != "boom" {
		t.Fatalf("client fault %+v", fs[1])
	}
}

// Watch sees every op as it is recorded: its invocation, then its
// completion, as the history then holds it.
func TestMemoryWatch(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	mem := recorder.NewMemory()
	rec := recorder.New(mem, recorder.WithClock(clk))
	var seen []history.Op
	mem.Watch(func(op history.Op) { seen = append(seen, op) })
	c := rec.Client("c")
	a := c.Acquire("k")
	clk.Advance(ms(1))
	h := a.OK(1, time.Time{})
	rec.NodeFaultAt(fault.Kill, 0, clk.Now(), clk.Now(), nil)
	h.Lost()
	mem.Watch(nil)
	h.Release().OK()

	ops := mem.History().Ops
	pending := ops[0]
	pending.Complete, pending.Outcome, pending.Token = 0, history.Pending, 0
	want := []history.Op{pending, ops[0], ops[1], ops[2], ops[2]}
	want[3].Complete, want[3].Outcome = 0, history.Pending
	if !reflect.DeepEqual(seen, want) {
		t.Fatalf("watched\n%+v\nwant\n%+v", seen, want)
	}
}
