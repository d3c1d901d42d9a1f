package backend_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/chaos/backend"
)

func TestProcessNodes(t *testing.T) {
	b := newBackend(t, 3)
	nodes := b.Nodes()
	if len(nodes) != 3 {
		t.Fatalf("%d nodes, want 3", len(nodes))
	}
	seen := map[string]bool{}
	for i, n := range nodes {
		if n.Index() != i {
			t.Errorf("node %d: Index() = %d", i, n.Index())
		}
		direct, err := b.DirectAddr(i)
		if err != nil {
			t.Fatal(err)
		}
		if n.Addr() == direct || seen[n.Addr()] {
			t.Errorf("node %d: address %s is not a proxy of its own (direct %s)", i, n.Addr(), direct)
		}
		seen[n.Addr()] = true
		if host, _, _ := net.SplitHostPort(n.Addr()); host != "127.0.0.1" {
			t.Errorf("node %d listens on %s, want loopback", i, n.Addr())
		}
		if err := newClient(t, n.Addr()).Ping(t.Context()).Err(); err != nil {
			t.Errorf("node %d: PING through proxy: %v", i, err)
		}
	}
	if got := backend.Addrs(b); len(got) != 3 || got[1] != nodes[1].Addr() {
		t.Errorf("Addrs = %v", got)
	}
}

func TestProcessBadNodeIndex(t *testing.T) {
	b := newBackend(t, 1)
	ctx := t.Context()
	for _, i := range []int{-1, 1} {
		for name, op := range map[string]func() error{
			"Kill":      func() error { return b.Kill(ctx, i) },
			"Start":     func() error { return b.Start(ctx, i) },
			"Restart":   func() error { return b.Restart(ctx, i, true) },
			"Pause":     func() error { return b.Pause(ctx, i) },
			"Resume":    func() error { return b.Resume(ctx, i) },
			"Partition": func() error { return b.Partition(ctx, i) },
			"Heal":      func() error { return b.Heal(ctx, i) },
			"Latency":   func() error { return b.SetLatency(ctx, i, time.Millisecond) },
			"ClockSkew": func() error { return b.SetClockSkew(ctx, i, "") },
			"Direct":    func() error { _, err := b.DirectAddr(i); return err },
		} {
			if err := op(); !errors.Is(err, backend.ErrNoNode) {
				t.Errorf("%s(%d) = %v, want ErrNoNode", name, i, err)
			}
		}
	}
	if err := b.SetLatency(ctx, 0, -time.Second); err == nil {
		t.Error("negative latency accepted")
	}
}

func TestProcessKillAndStartKeepData(t *testing.T) {
	b := newBackend(t, 3)
	ctx := t.Context()
	c := newClient(t, b.Nodes()[1].Addr())
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := b.Kill(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := b.Kill(ctx, 1); err != nil {
		t.Fatalf("second Kill: %v", err)
	}
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("killed node answered PING through its proxy")
	}
	if err := b.Pause(ctx, 1); !errors.Is(err, backend.ErrNotRunning) {
		t.Fatalf("Pause of a killed node = %v, want ErrNotRunning", err)
	}
	if err := b.Start(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctx, 1); err != nil {
		t.Fatalf("Start of a running node: %v", err)
	}
	// The same client, at the same address: go-redis dials again.
	eventually(t, 2*time.Second, "GET after start", func() error {
		v, err := get(ctx, c, "k")
		if err == nil && v != "v" {
			return fmt.Errorf("got %q, want %q", v, "v")
		}
		return err
	})
}

func TestProcessRestart(t *testing.T) {
	for _, tc := range []struct {
		withData bool
		want     string
	}{{true, "v"}, {false, ""}} {
		t.Run(fmt.Sprintf("withData=%v", tc.withData), func(t *testing.T) {
			b := newBackend(t, 1)
			ctx := t.Context()
			c := newClient(t, b.Nodes()[0].Addr())
			if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
				t.Fatal(err)
			}
			if err := b.Restart(ctx, 0, tc.withData); err != nil {
				t.Fatal(err)
			}
			eventually(t, 2*time.Second, "GET after restart", func() error {
				v, err := get(ctx, c, "k")
				if err == nil && v != tc.want {
					return fmt.Errorf("got %q, want %q", v, tc.want)
				}
				return err
			})
		})
	}
}

func TestProcessPauseAndResume(t *testing.T) {
	b := newBackend(t, 1)
	ctx := t.Context()
	c := newClient(t, b.Nodes()[0].Addr())
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := b.Pause(ctx, 0); err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := c.Ping(pctx).Err(); err == nil {
		t.Fatal("paused node answered PING within 100ms")
	}
	if err := b.Resume(ctx, 0); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Second, "PING after resume", func() error { return c.Ping(ctx).Err() })
}

func TestProcessPartitionAndHeal(t *testing.T) {
	b := newBackend(t, 3)
	ctx := t.Context()
	c := newClient(t, b.Nodes()[2].Addr())
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := b.Partition(ctx, 2); err != nil {
		t.Fatal(err)
	}

	// Open connection: the request is dropped and times out.
	start := time.Now()
	err := c.Set(ctx, "lost", "x", 0).Err()
	var nerr net.Error
	if !errors.As(err, &nerr) || !nerr.Timeout() {
		t.Fatalf("SET during partition = %v, want a timeout", err)
	}
	if took := time.Since(start); took < 100*time.Millisecond {
		t.Fatalf("SET during partition failed after %v: want a timeout, not a refusal", took)
	}
	// New connection: the proxy accepts it, but nothing comes back.
	if err := newClient(t, b.Nodes()[2].Addr()).Ping(ctx).Err(); err == nil {
		t.Fatal("a new client got through the partition")
	}
	// The node itself is fine, and the dropped SET never reached it.
	direct, err := b.DirectAddr(2)
	if err != nil {
		t.Fatal(err)
	}
	dc := newClient(t, direct)
	if v, err := get(ctx, dc, "k"); err != nil || v != "v" {
		t.Fatalf("direct GET during partition = %q, %v", v, err)
	}
	// Other nodes are not affected.
	if err := newClient(t, b.Nodes()[0].Addr()).Ping(ctx).Err(); err != nil {
		t.Fatalf("node 0 during node 2's partition: %v", err)
	}

	if err := b.Heal(ctx, 2); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Second, "GET through the same client after heal", func() error {
		v, err := get(ctx, c, "k")
		if err == nil && v != "v" {
			return fmt.Errorf("got %q", v)
		}
		return err
	})
	if v, err := get(ctx, dc, "lost"); err != nil || v != "" {
		t.Fatalf("SET sent during the partition reached the node: %q, %v", v, err)
	}
}

// minRTT is the fastest of n PINGs.
func minRTT(t *testing.T, c *redis.Client, n int) time.Duration {
	t.Helper()
	best := time.Duration(1 << 62)
	for range n {
		start := time.Now()
		if err := c.Ping(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
		best = min(best, time.Since(start))
	}
	return best
}

func TestProcessLatency(t *testing.T) {
	const d = 60 * time.Millisecond
	b := newBackend(t, 1)
	ctx := t.Context()
	c := redis.NewClient(&redis.Options{Addr: b.Nodes()[0].Addr(), ReadTimeout: 2 * time.Second, MaxRetries: -1, PoolSize: 1})
	t.Cleanup(func() { _ = c.Close() })
	if base := minRTT(t, c, 3); base >= d {
		t.Skipf("PING takes %v without latency: machine too slow to measure %v", base, d)
	}
	if err := b.SetLatency(ctx, 0, d); err != nil {
		t.Fatal(err)
	}
	if got := minRTT(t, c, 3); got < d {
		t.Fatalf("PING with %v latency took %v", d, got)
	}
	if err := b.SetLatency(ctx, 0, 0); err != nil {
		t.Fatal(err)
	}
	if got := minRTT(t, c, 5); got >= d {
		t.Fatalf("PING after latency removed still takes %v", got)
	}
}

func TestProcessCloseIsFinal(t *testing.T) {
	b, err := backend.NewProcess(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	addr := b.Nodes()[0].Addr()
	c := newClient(t, addr)
	if err := c.Ping(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := b.Kill(t.Context(), 0); !errors.Is(err, backend.ErrClosed) {
		t.Fatalf("Kill after Close = %v, want ErrClosed", err)
	}
	if err := c.Ping(t.Context()).Err(); err == nil {
		t.Fatal("node answered after Close")
	}
}

// TestProcessCloseReleasesHeldBytes closes the backend while its proxy is
// holding a request back (a latency of an hour): nothing may be left behind
// (goleak checks at the end of the run).
func TestProcessCloseReleasesHeldBytes(t *testing.T) {
	b, err := backend.NewProcess(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, b.Nodes()[0].Addr())
	if err := c.Ping(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	if err := b.SetLatency(t.Context(), 0, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(t.Context()).Err(); err == nil {
		t.Fatal("PING came back through an hour of latency")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}
