package redlock_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/redlock"
)

// hookLog is an eventLog that also implements every optional observer
// interface.
type hookLog struct {
	*eventLog
	mu     sync.Mutex // protects the fields below
	calls  []acquireCall
	ended  map[uint64]int // token → HoldEnded calls
	trips  map[int]int    // node → NodeRoundTrip calls
	traces []*opTrace
}

type acquireCall struct {
	key    string
	token  uint64
	err    error
	waited time.Duration
}

type opTrace struct {
	op    redlock.Op
	key   string
	token uint64
	ctx   context.Context

	mu     sync.Mutex // protects the fields below
	nodes  []int
	ends   int
	endTok uint64
	endErr error
}

func (t *opTrace) Node(node int, _ time.Duration, _ error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.nodes = append(t.nodes, node)
}

func (t *opTrace) End(token uint64, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ends++
	t.endTok, t.endErr = token, err
}

var (
	_ redlock.AcquireObserver   = (*hookLog)(nil)
	_ redlock.HoldObserver      = (*hookLog)(nil)
	_ redlock.RoundTripObserver = (*hookLog)(nil)
	_ redlock.Tracer            = (*hookLog)(nil)
)

func newHookLog() *hookLog {
	return &hookLog{eventLog: newEventLog(), ended: map[uint64]int{}, trips: map[int]int{}}
}

func (h *hookLog) AcquireReturned(key string, token uint64, err error, waited time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, acquireCall{key, token, err, waited})
}

func (h *hookLog) HoldEnded(_ string, token uint64, _ time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ended[token]++
}

func (h *hookLog) NodeRoundTrip(node int, _ time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.trips[node]++
}

func (h *hookLog) StartOp(ctx context.Context, op redlock.Op, key string, token uint64) redlock.OpTrace {
	t := &opTrace{op: op, key: key, token: token, ctx: ctx}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.traces = append(h.traces, t)
	return t
}

type ctxMark struct{}

// TestOptionalObserverHooks checks each optional observer interface
// against the calls that must cause it.
func TestOptionalObserverHooks(t *testing.T) {
	r := newRig(t, 3)
	h := newHookLog()
	c := r.client(t, redlock.WithObserver(h), redlock.WithRetry(redlock.NoRetry()))
	ctx := context.WithValue(t.Context(), ctxMark{}, "caller")

	start := time.Now()
	l, err := c.TryLock(ctx, "k", time.Minute)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.TryLock(ctx, "k", time.Minute); !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("second TryLock: %v, want ErrNotAcquired", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.Lock(cancelled, "k", time.Minute); !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock with a cancelled ctx: %v, want context.Canceled", err)
	}
	if _, err := c.TryLock(ctx, "", time.Minute); !errors.Is(err, redlock.ErrInvalidArgument) {
		t.Fatalf("TryLock of an empty key: %v", err)
	}
	if err := l.Extend(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	t.Run("AcquireReturned", func(t *testing.T) {
		if len(h.calls) != 3 {
			t.Fatalf("%d AcquireReturned calls, want 3 (bad input is not one): %+v", len(h.calls), h.calls)
		}
		if got := h.calls[0]; got.token != l.Token() || got.err != nil || got.waited <= 0 || got.waited > took {
			t.Errorf("first call %+v, want token %d, no error, waited in (0, %v]", got, l.Token(), took)
		}
		if got := h.calls[1]; got.token != 0 || !errors.Is(got.err, redlock.ErrNotAcquired) {
			t.Errorf("refused call %+v, want token 0 and ErrNotAcquired", got)
		}
		if got := h.calls[2]; !errors.Is(got.err, context.Canceled) {
			t.Errorf("cancelled call %+v, want context.Canceled", got)
		}
	})
	t.Run("HoldEnded", func(t *testing.T) {
		if len(h.ended) != 1 || h.ended[l.Token()] != 1 {
			t.Errorf("HoldEnded calls by token %v, want one for %d", h.ended, l.Token())
		}
	})
	t.Run("NodeRoundTrip", func(t *testing.T) {
		for i := range 3 {
			if h.trips[i] == 0 {
				t.Errorf("no round trip of node %d: %v", i, h.trips)
			}
		}
	})
	t.Run("Tracer", func(t *testing.T) {
		want := []struct {
			op    redlock.Op
			token uint64
			fails bool
		}{
			{redlock.OpAcquire, 0, false}, {redlock.OpAcquire, 0, true}, {redlock.OpAcquire, 0, true},
			{redlock.OpExtend, l.Token(), false}, {redlock.OpUnlock, l.Token(), false},
		}
		if len(h.traces) != len(want) {
			t.Fatalf("%d traced operations, want %d", len(h.traces), len(want))
		}
		for i, w := range want {
			tr := h.traces[i]
			tr.mu.Lock()
			if tr.op != w.op || tr.key != "k" || tr.token != w.token || tr.ends != 1 || (tr.endErr != nil) != w.fails {
				t.Errorf("operation %d: %v key %q token %d, ended %d times with %v; want %v, token %d, fails %v",
					i, tr.op, tr.key, tr.token, tr.ends, tr.endErr, w.op, w.token, w.fails)
			}
			if tr.ctx.Value(ctxMark{}) != "caller" {
				t.Errorf("operation %d: StartOp was not given the caller's ctx", i)
			}
			if w.op != redlock.OpAcquire || !w.fails {
				if len(tr.nodes) < c.Quorum() {
					t.Errorf("operation %d (%v): node events %v, want at least a quorum", i, tr.op, tr.nodes)
				}
			}
			tr.mu.Unlock()
		}
		if got := h.traces[0].endTok; got != l.Token() {
			t.Errorf("acquire ended with token %d, want %d", got, l.Token())
		}
	})
}

// TestObservers: Observers passes each event, optional ones included, to
// every part that implements it, and the Client calls an optional one only
// when a part does.
func TestObservers(t *testing.T) {
	r := newRig(t, 3)
	a, b := newHookLog(), newHookLog()
	plain := newEventLog()
	c := r.client(t, redlock.WithObserver(redlock.Observers(a, nil, plain, b)))
	l, err := c.TryLock(t.Context(), "k", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	for name, h := range map[string]*hookLog{"first": a, "second": b} {
		h.mu.Lock()
		if len(h.calls) != 1 || h.ended[l.Token()] != 1 || len(h.traces) != 2 || len(h.trips) == 0 {
			t.Errorf("%s part: %d AcquireReturned, %d HoldEnded, %d traces, round trips %v; want 1, 1, 2, some",
				name, len(h.calls), h.ended[l.Token()], len(h.traces), h.trips)
		}
		for _, tr := range h.traces {
			tr.mu.Lock()
			if tr.ends != 1 {
				t.Errorf("%s part: a trace of %v ended %d times", name, tr.op, tr.ends)
			}
			tr.mu.Unlock()
		}
		h.mu.Unlock()
		if n := h.count(isKind("acquired")) + h.count(isKind("released")); n != 2 {
			t.Errorf("%s part: %d Acquired and Released events, want 2", name, n)
		}
	}
	if n := plain.count(isKind("acquired")) + plain.count(isKind("released")); n != 2 {
		t.Errorf("plain part: %d Acquired and Released events, want 2", n)
	}
}

// panicker is an Observer, with every optional interface, that panics in
// each call; with traceOnly, only its operation traces panic.
type panicker struct{ traceOnly bool }

func (p panicker) boom() {
	if !p.traceOnly {
		panic("observer bug")
	}
}
func (p panicker) Acquired(string, uint64, time.Duration)               { p.boom() }
func (p panicker) Released(string, uint64)                              { p.boom() }
func (p panicker) Extended(string, uint64)                              { p.boom() }
func (p panicker) Lost(string, uint64)                                  { p.boom() }
func (p panicker) NodeError(*redlock.NodeError)                         { p.boom() }
func (p panicker) AcquireReturned(string, uint64, error, time.Duration) { p.boom() }
func (p panicker) HoldEnded(string, uint64, time.Duration)              { p.boom() }
func (p panicker) NodeRoundTrip(int, time.Duration)                     { p.boom() }
func (p panicker) Node(int, time.Duration, error)                       { panic("trace bug") }
func (p panicker) End(uint64, error)                                    { panic("trace bug") }
func (p panicker) StartOp(context.Context, redlock.Op, string, uint64) redlock.OpTrace {
	p.boom()
	return p
}

// TestObserversAPanickingPartCostsTheOthersNothing: a panic in one part
// of Observers is recovered (as any Observer's is), and the parts after it
// still hear every event: a metrics part's bug must not end the tracing
// part's spans, nor lose its HoldEnded ("exactly once per hold").
func TestObserversAPanickingPartCostsTheOthersNothing(t *testing.T) {
	r := newRig(t, 3)
	for _, tc := range []struct {
		name string
		bad  panicker
	}{
		{"panics in every event", panicker{}},
		{"its traces panic", panicker{traceOnly: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHookLog()
			c := r.client(t, redlock.WithObserver(redlock.Observers(tc.bad, h)),
				redlock.WithLogger(slog.New(slog.DiscardHandler)))
			l, err := c.TryLock(t.Context(), "k", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Unlock(t.Context()); err != nil {
				t.Fatal(err)
			}
			h.mu.Lock()
			defer h.mu.Unlock()
			if len(h.calls) != 1 || h.ended[l.Token()] != 1 || len(h.traces) != 2 || len(h.trips) == 0 {
				t.Errorf("the part after the panicking one: %d AcquireReturned, %d HoldEnded, %d traces, round trips %v; want 1, 1, 2, some",
					len(h.calls), h.ended[l.Token()], len(h.traces), h.trips)
			}
			for _, tr := range h.traces {
				tr.mu.Lock()
				if tr.ends != 1 {
					t.Errorf("its trace of %v ended %d times, want 1", tr.op, tr.ends)
				}
				tr.mu.Unlock()
			}
			if n := h.count(isKind("acquired")) + h.count(isKind("released")); n != 2 {
				t.Errorf("it heard %d Acquired and Released events, want 2", n)
			}
		})
	}
}
