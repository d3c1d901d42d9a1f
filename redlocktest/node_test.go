package redlocktest_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/internal/redistest"
	"github.com/fencedlock/fencedlock/redlocktest"
)

// cutOff is how long a call is given before a test calls it cut off: many
// round trips of the run's own, so that a node that could answer would have.
func cutOff(t *testing.T, ns redlocktest.NodeSet) time.Duration {
	t.Helper()
	return 100 * redistest.PingRTT(t, ns.Clients())
}

// direct is a client of the node's server itself, past the proxy.
func direct(t *testing.T, n *redlocktest.Node) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: n.ServerAddr(), MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// timedOut reports whether err says the call got no answer in time.
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

func TestKill(t *testing.T) {
	ns := redlocktest.Nodes(t, 3)
	ctx := t.Context()
	if err := ns[0].Kill(); err != nil {
		t.Fatal(err)
	}
	if err := ns[0].Client().Ping(ctx).Err(); err == nil {
		t.Fatal("PING to a killed node answered")
	}
	if err := ns[0].Kill(); err != nil { // a stopped node: nothing to do
		t.Fatalf("second Kill: %v", err)
	}
	for _, n := range ns[1:] {
		if err := n.Client().Ping(ctx).Err(); err != nil {
			t.Errorf("a node that was not killed: %v", err)
		}
	}
	for _, f := range []func() error{ns[0].Pause, ns[0].Resume} {
		if err := f(); !errors.Is(err, redlocktest.ErrNotRunning) {
			t.Errorf("Pause or Resume on a killed node: %v, want %v", err, redlocktest.ErrNotRunning)
		}
	}
}

func TestRestart(t *testing.T) {
	for _, tc := range []struct {
		name     string
		opts     []redlocktest.Option
		restart  func(*redlocktest.Node, context.Context) error
		wantKept bool
	}{
		{"with AOF", []redlocktest.Option{redlocktest.WithAOF()}, (*redlocktest.Node).Restart, true},
		{"without AOF", nil, (*redlocktest.Node).Restart, false},
		{"empty, with AOF", []redlocktest.Option{redlocktest.WithAOF()}, (*redlocktest.Node).RestartEmpty, false},
		{"killed first, with AOF", []redlocktest.Option{redlocktest.WithAOF()},
			func(n *redlocktest.Node, ctx context.Context) error {
				return errors.Join(n.Kill(), n.Restart(ctx))
			}, true},
		{"paused first, with AOF", []redlocktest.Option{redlocktest.WithAOF()},
			func(n *redlocktest.Node, ctx context.Context) error {
				return errors.Join(n.Pause(), n.Restart(ctx))
			}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := redlocktest.Nodes(t, 1, tc.opts...)
			ctx, c := t.Context(), ns[0].Client()
			addr := ns[0].Addr()
			if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
				t.Fatal(err)
			}
			if err := tc.restart(ns[0], ctx); err != nil {
				t.Fatal(err)
			}
			if ns[0].Addr() != addr {
				t.Errorf("address %s after the restart, was %s", ns[0].Addr(), addr)
			}
			// The same client: its connection to the old process is gone,
			// and it dials the new one.
			v, err := c.Get(ctx, "k").Result()
			switch {
			case tc.wantKept && (err != nil || v != "v"):
				t.Errorf("after the restart k = %q, %v; want %q", v, err, "v")
			case !tc.wantKept && !errors.Is(err, redis.Nil):
				t.Errorf("after the restart k = %q, %v; want no key", v, err)
			}
		})
	}
}

func TestPauseAndResume(t *testing.T) {
	ns := redlocktest.Nodes(t, 1)
	wait := cutOff(t, ns)
	ctx, c := t.Context(), ns[0].Client()
	if err := ns[0].Pause(); err != nil {
		t.Fatal(err)
	}
	paused, cancel := context.WithTimeout(ctx, wait)
	err := c.Set(paused, "k", "sent while paused", 0).Err()
	cancel()
	if !timedOut(err) {
		t.Fatalf("SET to a paused node: %v, want a timeout", err)
	}
	if err := ns[0].Resume(); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Resume: %v", err)
	}
	// The request waited in the frozen server's socket: it is carried out,
	// though its caller gave up.
	d := direct(t, ns[0])
	for deadline := time.Now().Add(10 * time.Second); d.Get(ctx, "k").Val() != "sent while paused"; {
		if time.Now().After(deadline) {
			t.Fatal("the SET sent while paused was not carried out after Resume")
		}
		time.Sleep(time.Millisecond) // polling the server
	}
}

func TestPartitionAndHeal(t *testing.T) {
	ns := redlocktest.Nodes(t, 2)
	wait := cutOff(t, ns)
	ctx := t.Context()
	ns[0].Partition()
	for _, call := range []struct {
		name string
		do   func(context.Context, *redis.Client) error
	}{
		{"SET on an open connection", func(ctx context.Context, c *redis.Client) error {
			return c.Set(ctx, "k", "sent across the partition", 0).Err()
		}},
		{"PING on a new client", func(ctx context.Context, _ *redis.Client) error {
			c := redis.NewClient(&redis.Options{Addr: ns[0].Addr(), MaxRetries: -1, ContextTimeoutEnabled: true})
			defer c.Close()
			return c.Ping(ctx).Err()
		}},
		{"PING after a restart", func(ctx context.Context, c *redis.Client) error {
			if err := ns[0].Restart(t.Context()); err != nil { // a partition outlasts it
				t.Fatal(err)
			}
			return c.Ping(ctx).Err()
		}},
	} {
		cut, cancel := context.WithTimeout(ctx, wait)
		err := call.do(cut, ns[0].Client())
		cancel()
		if !timedOut(err) {
			t.Errorf("%s across the partition: %v, want a timeout", call.name, err)
		}
	}
	if err := ns[1].Client().Ping(ctx).Err(); err != nil {
		t.Errorf("the other node: %v", err)
	}
	// The node runs on, and the request never reached it.
	if n, err := direct(t, ns[0]).Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Fatalf("the partitioned node's own address: EXISTS k = %d, %v; want 0", n, err)
	}
	ns[0].Heal()
	if err := ns[0].Client().Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET after Heal: %v, want %v", err, redis.Nil)
	}
}
