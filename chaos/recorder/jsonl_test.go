package recorder_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fencedlock/fencedlock/chaos/checker"
	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/history"
	"github.com/fencedlock/fencedlock/chaos/recorder"
	"github.com/fencedlock/fencedlock/clock"
	"github.com/fencedlock/fencedlock/fencing"
	"github.com/fencedlock/fencedlock/internal/redistest"
	"github.com/fencedlock/fencedlock/redlock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Every kind of call comes back from the file as the op it records.
func TestJSONLLines(t *testing.T) {
	var buf bytes.Buffer
	clk := clock.NewFake(time.Unix(100, 0))
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	step := func() { clk.Advance(time.Millisecond) }
	rec := recorder.New(recorder.NewJSONL(&buf), recorder.WithClock(clk), recorder.WithNodes(3))

	ca, cb := rec.Client("a"), rec.Client("b")
	a := ca.Acquire("k")
	b := cb.Acquire("k")
	step()
	h := a.OK(5, clk.Now().Add(ms(30))) // t=1, valid until 31
	b.Fail(errors.New("not acquired"))
	kill := rec.NodeFault(fault.Kill, 2)
	w := h.Write("db", "e1")
	step()
	w.Accepted() // t=2
	w.Rejected() // a second completion does nothing
	e := h.Extend()
	step()
	e.OK(clk.Now().Add(ms(40))) // t=3, valid until 43
	pause := ca.Fault(fault.ClientPause)
	step()
	h.Lost()                       // t=4
	pause.Fail(errors.New("boom")) // t=4
	s := h.Write("db", "e2")
	s.Rejected()
	r := h.Release()
	step()
	r.LockLost() // t=5
	kill.End()
	stuck := cb.Acquire("k") // never returns
	_ = stuck
	rec.Store("db", []string{"e1"})
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}

	file := buf.String()
	got, err := history.ReadJSONL(&buf)
	if err != nil {
		t.Fatalf("%v\n%s", err, file)
	}
	hold := func(op history.Op) history.Op { op.Client, op.Key, op.Hold, op.Token = 0, "k", 1, 5; return op }
	want := history.History{
		Nodes: 3, Clients: []string{"a", "b"}, End: ms(5), Final: map[string][]string{"db": {"e1"}},
		Ops: []history.Op{
			{ID: 1, Kind: history.KindAcquire, Client: 0, Key: "k", Invoke: 0, Complete: ms(1), Outcome: history.OK, Token: 5, ValidUntil: ms(31)},
			{ID: 2, Kind: history.KindAcquire, Client: 1, Key: "k", Invoke: 0, Complete: ms(1), Outcome: history.Failed, Err: "not acquired"},
			// Invoked at the same time, by the order of their lines: the fault's is written when it ends.
			hold(history.Op{ID: 3, Kind: history.KindWrite, Invoke: ms(1), Complete: ms(2), Outcome: history.OK, Resource: "db", Entry: "e1"}),
			{ID: 4, Kind: history.KindFault, Fault: fault.Kill, Node: 2, Invoke: ms(1), Complete: ms(5), Outcome: history.OK},
			hold(history.Op{ID: 5, Kind: history.KindExtend, Invoke: ms(2), Complete: ms(3), Outcome: history.OK, ValidUntil: ms(43)}),
			{ID: 6, Kind: history.KindFault, Fault: fault.ClientPause, Client: 0, Invoke: ms(3), Complete: ms(4), Outcome: history.Failed, Err: "boom"},
			hold(history.Op{ID: 7, Kind: history.KindLost, Invoke: ms(4), Complete: ms(4), Outcome: history.OK}),
			hold(history.Op{ID: 8, Kind: history.KindWrite, Invoke: ms(4), Complete: ms(4), Outcome: history.Rejected, Resource: "db", Entry: "e2"}),
			hold(history.Op{ID: 9, Kind: history.KindRelease, Invoke: ms(4), Complete: ms(5), Outcome: history.LockLost}),
			{ID: 10, Kind: history.KindAcquire, Client: 1, Key: "k", Invoke: ms(5)},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("read back\n%+v\nwant\n%+v\nfile:\n%s", got, want, file)
	}
	if res := checker.Check(got, checker.CheckOptions{}); res.Verdict != checker.VerdictUnknown || res.Pending != 1 {
		t.Errorf("a call still in flight at Close: verdict %s (%s), want unknown", res.Verdict, res.Reason)
	}
}

type failingWriter struct{ n int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.n == 0 {
		return 0, errors.New("disk full")
	}
	w.n--
	return len(p), nil
}

func TestJSONLKeepsTheFirstWriteError(t *testing.T) {
	w := &failingWriter{n: 1}
	sink := recorder.NewJSONL(w)
	rec := recorder.New(sink)
	a := rec.Client("a")
	a.Acquire("k").Fail(errors.New("no")) // written
	a.Acquire("k").Fail(errors.New("no")) // fails
	rec.Store("r", nil)
	if err := sink.Err(); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Err() = %v, want the write error", err)
	}
	if err := rec.Close(); err == nil {
		t.Fatal("Close() = nil after a failed write")
	}
}

// Clients of a real lock on real nodes, recorded concurrently: the history
// reads back whole and checks clean.
func TestJSONLAroundRedlock(t *testing.T) {
	nodes := redistest.Clients(t, redistest.StartN(t, 3))
	var file bytes.Buffer
	rec := recorder.New(recorder.NewJSONL(&syncWriter{w: &file}), recorder.WithNodes(3))
	guard := fencing.NewMemory()
	const clients, holds = 4, 15
	var wg sync.WaitGroup
	for c := range clients {
		rl, err := redlock.New(nodes)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rl.Close() })
		wg.Go(func() { hold(t.Context(), rec.Client(fmt.Sprint("client-", c)), rl, guard, c, holds) })
	}
	wg.Wait()
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	h, err := history.ReadJSONL(&file)
	if err != nil {
		t.Fatal(err)
	}
	res := checker.Check(h, checker.CheckOptions{})
	if res.Verdict != checker.VerdictOK || res.Acquisitions != clients*holds || res.Writes != clients*holds || res.Pending != 0 {
		t.Fatalf("verdict %s (%s): %d acquisitions, %d writes, %d pending; want ok, %d, %d, 0",
			res.Verdict, res.Reason, res.Acquisitions, res.Writes, res.Pending, clients*holds, clients*holds)
	}
	if len(h.Clients) != clients || !res.Liveness.Checked {
		t.Errorf("clients %v, liveness %+v", h.Clients, res.Liveness)
	}
}

// hold takes the lock n times as client number c, recording each call.
func hold(ctx context.Context, client *recorder.Client, rl *redlock.Client, guard fencing.Guard, c, n int) {
	for i := 0; i < n; {
		a := client.Acquire("job")
		l, err := rl.Lock(ctx, "job", time.Second)
		if err != nil {
			a.Fail(err)
			continue
		}
		h := a.Value(l.Value()).OK(l.Token(), l.Until())
		w := h.Write("results", fmt.Sprintf("client-%d-%d", c, i))
		switch err := guard.Admit(ctx, "results", l.Token()); {
		case errors.Is(err, fencing.ErrStaleToken):
			w.Rejected()
		case err != nil:
			w.Fail(err)
		default:
			w.Accepted()
		}
		r := h.Release()
		switch err := l.Unlock(ctx); {
		case err == nil:
			r.OK()
		case errors.Is(err, redlock.ErrLockLost):
			r.LockLost()
		default:
			r.Fail(err)
		}
		i++
	}
}

// syncWriter lets the test read the buffer the recorder writes to.
type syncWriter struct {
	mu sync.Mutex // protects w
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
