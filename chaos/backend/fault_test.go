package backend_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/chaos/backend"
	"github.com/fencedlock/fencedlock/chaos/backend/backendtest"
)

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
			b := &backendtest.Recording{N: 3}
			undo, err := tc.fault.Inject(t.Context(), b)
			if err != nil {
				t.Fatal(err)
			}
			if got := b.Took(); !slices.Equal(got, tc.wantInject) {
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
			if got := b.Took()[len(tc.wantInject):]; !slices.Equal(got, tc.wantUndo) {
				t.Fatalf("undo called %q, want %q", got, tc.wantUndo)
			}
		})
	}
}

func TestFaultInjectErrorHasNoUndo(t *testing.T) {
	boom := errors.New("boom")
	b := &backendtest.Recording{N: 1, Fail: map[string]error{"kill": boom, "pause": boom, "partition": boom, "latency": boom, "skew": boom}}
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
	b := &backendtest.Recording{N: 1}
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
	b = &backendtest.Recording{N: 1}
	undo, err = backend.DelayedRestart{Node: 0, Down: time.Hour}.Inject(t.Context(), b)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := undo(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("undo with a cancelled ctx = %v, want context.Canceled", err)
	}
	if got := b.Took(); !slices.Equal(got, []string{"kill 0"}) {
		t.Fatalf("calls %q, want only the kill", got)
	}
}
