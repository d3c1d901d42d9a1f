package redlockprom_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencedlock/fencedlock/redlock"
	"github.com/fencedlock/fencedlock/redlock/redlockprom"
	"github.com/fencedlock/fencedlock/redlocktest"
)

func TestOutcome(t *testing.T) {
	ne := &redlock.NodeError{Node: 1, Addr: "127.0.0.1:1", Err: errors.New("refused")}
	for _, tt := range []struct {
		err  error
		want string
	}{
		{nil, redlockprom.Acquired},
		{redlock.ErrNotAcquired, redlockprom.Refused},
		{errors.Join(redlock.ErrNotAcquired, ne), redlockprom.NodeError},
		{errors.Join(redlock.ErrNotAcquired, context.Canceled, ne), redlockprom.Canceled},
		{errors.Join(redlock.ErrNotAcquired, context.DeadlineExceeded), redlockprom.DeadlineExceeded},
		{errors.Join(redlock.ErrNotAcquired, &redlock.NodeError{Node: 2, Err: fmt.Errorf("dial: %w", context.DeadlineExceeded)}), redlockprom.NodeError},
		{fmt.Errorf("wrapped: %w", errors.Join(redlock.ErrNotAcquired, context.Canceled)), redlockprom.Canceled},
	} {
		t.Run(fmt.Sprint(tt.err), func(t *testing.T) {
			if got := redlockprom.Outcome(tt.err); got != tt.want {
				t.Errorf("Outcome(%v) = %q, want %q", tt.err, got, tt.want)
			}
		})
	}
}

func TestNewTwiceOnOneRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := redlockprom.New(reg); err != nil {
		t.Fatal(err)
	}
	var already prometheus.AlreadyRegisteredError
	if _, err := redlockprom.New(reg); !errors.As(err, &already) {
		t.Errorf("second New on one registry: %v, want an AlreadyRegisteredError", err)
	}
	if _, err := redlockprom.New(nil); err == nil {
		t.Error("New(nil): no error")
	}
}

// TestReacquiredCounter: a key that an extension re-creates on a node that
// lost it (WithReacquireOnExtend) counts under that node.
func TestReacquiredCounter(t *testing.T) {
	nodes := redlocktest.Nodes(t, 3)
	reg := prometheus.NewRegistry()
	m, err := redlockprom.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := redlock.New(nodes.Clients(), redlock.WithReacquireOnExtend(), redlock.WithObserver(m),
		redlock.WithNodeTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := t.Context()
	l, err := c.TryLock(ctx, "reacquired", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// The grant on node 1 may still be on its way: wait for it, then lose it.
	deadline := time.Now().Add(5 * time.Second)
	for nodes[1].Client().Get(ctx, "reacquired").Val() != l.Value() {
		if time.Now().After(deadline) {
			t.Fatal("node 1 never held the key")
		}
		time.Sleep(time.Millisecond)
	}
	if err := nodes[1].Client().FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := l.Extend(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	for reacquired(t, reg, "1") != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("fencedlock_reacquired_total{node=\"1\"} = %v, want 1 (re-creates seen: %v)", reacquired(t, reg, "1"), l.Reacquired())
		}
		time.Sleep(time.Millisecond)
	}
	if got := reacquired(t, reg, "0"); got != 0 {
		t.Errorf("fencedlock_reacquired_total{node=\"0\"} = %v, want 0", got)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// reacquired is fencedlock_reacquired_total for node, 0 if absent.
func reacquired(t *testing.T, reg *prometheus.Registry, node string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != "fencedlock_reacquired_total" {
			continue
		}
		for _, mt := range f.GetMetric() {
			for _, lp := range mt.GetLabel() {
				if lp.GetName() == "node" && lp.GetValue() == node {
					return mt.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
