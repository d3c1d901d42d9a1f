package backend_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/chaos/backend"
)

// recBackend records the calls made to it; calls to a node in fail fail.
type recBackend struct {
	n    int
	fail map[string]error // by op name

	mu    sync.Mutex // protects calls
	calls []string
}

var _ backend.Backend = (*recBackend)(nil)

type recNode int

func (n recNode) Index() int   { return int(n) }
func (n recNode) Addr() string { return fmt.Sprintf("node%d:6379", int(n)) }

func (b *recBackend) Nodes() []backend.Node {
	var nodes []backend.Node
	for i := range b.n {
		nodes = append(nodes, recNode(i))
	}
	return nodes
}

func (b *recBackend) do(op string, i int, arg ...any) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := fmt.Sprintf("%s %d", op, i)
	for _, a := range arg {
		c += fmt.Sprintf(" %v", a)
	}
	b.calls = append(b.calls, c)
	return b.fail[op]
}

func (b *recBackend) took() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.calls)
}

func (b *recBackend) Kill(_ context.Context, i int) error  { return b.do("kill", i) }
func (b *recBackend) Start(_ context.Context, i int) error { return b.do("start", i) }
func (b *recBackend) Restart(_ context.Context, i int, withData bool) error {
	return b.do("restart", i, withData)
}
func (b *recBackend) Pause(_ context.Context, i int) error     { return b.do("pause", i) }
func (b *recBackend) Resume(_ context.Context, i int) error    { return b.do("resume", i) }
func (b *recBackend) Partition(_ context.Context, i int) error { return b.do("partition", i) }
func (b *recBackend) Heal(_ context.Context, i int) error      { return b.do("heal", i) }
func (b *recBackend) SetLatency(_ context.Context, i int, d time.Duration) error {
	return b.do("latency", i, d)
}
func (b *recBackend) SetClockSkew(_ context.Context, i int, spec string) error {
	return b.do("skew", i, fmt.Sprintf("%q", spec))
}
func (b *recBackend) Close() error { return nil }

func TestFaultsInjectAndUndo(t *testing.T) {
	for _, tc := range []struct {
		fault      backend.Fault
		wantInject []string
		wantUndo   []string // nil: the fault has no undo
	}{
		{backend.Kill{Node: 1}, []string{"kill 1"}, []string{"start 1"}},
		{backend.Restart{Node: 2, WithData: true}, []string{"restart 2 true"}, nil},
		{backend.Restart{Node: 2}, []string{"restart 2 false"}, nil},
		{backend.DelayedRestart{Node: 0}, []string{"kill 0"}, []string{"restart 0 false"}},
		{backend.DelayedRestart{Node: 0, WithData: true}, []string{"kill 0"}, []string{"restart 0 true"}},
		{backend.Pause{Node: 1}, []string{"pause 1"}, []string{"resume 1"}},
		{backend.Partition{Node: 1}, []string{"partition 1"}, []string{"heal 1"}},
		{backend.Latency{Node: 1, D: 40 * time.Millisecond}, []string{"latency 1 40ms"}, []string{"latency 1 0s"}},
		{backend.ClockSkew{Node: 1, Spec: "+0 x2"}, []string{`skew 1 "+0 x2"`}, []string{`skew 1 ""`}},
	} {
		t.Run(fmt.Sprint(tc.fault), func(t *testing.T) {
			b := &recBackend{n: 3}
			undo, err := tc.fault.Inject(t.Context(), b)
			if err != nil {
				t.Fatal(err)
			}
			if got := b.took(); !slices.Equal(got, tc.wantInject) {
				t.Fatalf("Inject called %q, want %q", got, tc.wantInject)
			}
			if (undo == nil) != (tc.wantUndo == nil) {
				t.Fatalf("undo is nil: %v, want %v", undo == nil, tc.wantUndo == nil)
			}
			if undo == nil {
				return
			}
			if err := undo(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got := b.took()[len(tc.wantInject):]; !slices.Equal(got, tc.wantUndo) {
				t.Fatalf("undo called %q, want %q", got, tc.wantUndo)
			}
		})
	}
}

func TestFaultInjectErrorHasNoUndo(t *testing.T) {
	boom := errors.New("boom")
	b := &recBackend{n: 1, fail: map[string]error{"kill": boom, "pause": boom, "partition": boom, "latency": boom, "skew": boom}}
	for _, f := range []backend.Fault{
		backend.Kill{}, backend.DelayedRestart{}, backend.Pause{}, backend.Partition{},
		backend.Latency{D: time.Second}, backend.ClockSkew{Spec: "+1s"},
	} {
		undo, err := f.Inject(t.Context(), b)
		if !errors.Is(err, boom) || undo != nil {
			t.Errorf("%v: Inject = (undo %v, %v), want (nil, boom)", f, undo != nil, err)
		}
	}
}

func TestDelayedRestartStaysDown(t *testing.T) {
	const down = 80 * time.Millisecond
	b := &recBackend{n: 1}
	start := time.Now()
	undo, err := backend.DelayedRestart{Node: 0, Down: down}.Inject(t.Context(), b)
	if err != nil {
		t.Fatal(err)
	}
	if err := undo(t.Context()); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < down {
		t.Fatalf("restarted after %v, want at least %v", took, down)
	}

	// ctx ends before Down: no restart.
	b = &recBackend{n: 1}
	undo, err = backend.DelayedRestart{Node: 0, Down: time.Hour}.Inject(t.Context(), b)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := undo(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("undo with a cancelled ctx = %v, want context.Canceled", err)
	}
	if got := b.took(); !slices.Equal(got, []string{"kill 0"}) {
		t.Fatalf("calls %q, want only the kill", got)
	}
}
