package backendtest

import (
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/chaos/backend"
)

// DirectBackend is a Backend that can also be reached around its proxies.
type DirectBackend interface {
	backend.Backend
	backend.Direct
}

// CheckNodes: n nodes, indexed in order, each behind a loopback proxy of its
// own that answers PING.
func CheckNodes(t *testing.T, b DirectBackend, n int) {
	t.Helper()
	nodes := b.Nodes()
	if len(nodes) != n {
		t.Fatalf("%d nodes, want %d", len(nodes), n)
	}
	seen := map[string]bool{}
	for i, node := range nodes {
		if node.Index() != i {
			t.Errorf("node %d: Index() = %d", i, node.Index())
		}
		direct, err := b.DirectAddr(i)
		if err != nil {
			t.Fatal(err)
		}
		if node.Addr() == direct || seen[node.Addr()] {
			t.Errorf("node %d: address %s is not a proxy of its own (direct %s)", i, node.Addr(), direct)
		}
		seen[node.Addr()] = true
		if host, _, _ := net.SplitHostPort(node.Addr()); host != "127.0.0.1" {
			t.Errorf("node %d listens on %s, want loopback", i, node.Addr())
		}
		if err := NewClient(t, node.Addr()).Ping(t.Context()).Err(); err != nil {
			t.Errorf("node %d: PING through proxy: %v", i, err)
		}
	}
	if got := backend.Addrs(b); len(got) != n || got[n-1] != nodes[n-1].Addr() {
		t.Errorf("Addrs = %v", got)
	}
}

// CheckBadNodeIndex: every operation on a node that does not exist fails
// with ErrNoNode (b has one node); extra adds implementation-specific ones.
func CheckBadNodeIndex(t *testing.T, b DirectBackend, extra map[string]func(i int) error) {
	t.Helper()
	ctx := t.Context()
	ops := map[string]func(i int) error{
		"Kill":      func(i int) error { return b.Kill(ctx, i) },
		"Start":     func(i int) error { return b.Start(ctx, i) },
		"Restart":   func(i int) error { return b.Restart(ctx, i, true) },
		"Pause":     func(i int) error { return b.Pause(ctx, i) },
		"Resume":    func(i int) error { return b.Resume(ctx, i) },
		"Partition": func(i int) error { return b.Partition(ctx, i) },
		"Heal":      func(i int) error { return b.Heal(ctx, i) },
		"Latency":   func(i int) error { return b.SetLatency(ctx, i, time.Millisecond) },
		"ClockSkew": func(i int) error { return b.SetClockSkew(ctx, i, "") },
		"Direct":    func(i int) error { _, err := b.DirectAddr(i); return err },
	}
	for name, op := range extra {
		ops[name] = op
	}
	for _, i := range []int{-1, 1} {
		for name, op := range ops {
			if err := op(i); !errors.Is(err, backend.ErrNoNode) {
				t.Errorf("%s(%d) = %v, want ErrNoNode", name, i, err)
			}
		}
	}
	if err := b.SetLatency(ctx, 0, -time.Second); err == nil {
		t.Error("negative latency accepted")
	}
}

// CheckKillAndStartKeepData: a killed node answers nothing, cannot be
// paused, and comes back with its data at the same client address; Kill and
// Start are idempotent. whileDown runs while node 1 is down.
func CheckKillAndStartKeepData(t *testing.T, b backend.Backend, whileDown func()) {
	t.Helper()
	ctx := t.Context()
	c := NewClient(t, b.Nodes()[1].Addr())
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
	if whileDown != nil {
		whileDown()
	}
	if err := b.Start(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctx, 1); err != nil {
		t.Fatalf("Start of a running node: %v", err)
	}
	// The same client, at the same address: go-redis dials again.
	Eventually(t, 2*time.Second, "GET after start", func() error {
		v, err := Get(ctx, c, "k")
		if err == nil && v != "v" {
			return fmt.Errorf("got %q, want %q", v, "v")
		}
		return err
	})
}

// CheckRestart: a restart with data keeps it, one without comes back empty.
func CheckRestart(t *testing.T, newB func(t *testing.T) backend.Backend) {
	for _, tc := range []struct {
		withData bool
		want     string
	}{{true, "v"}, {false, ""}} {
		t.Run(fmt.Sprintf("withData=%v", tc.withData), func(t *testing.T) {
			b := newB(t)
			ctx := t.Context()
			c := NewClient(t, b.Nodes()[0].Addr())
			if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
				t.Fatal(err)
			}
			if err := b.Restart(ctx, 0, tc.withData); err != nil {
				t.Fatal(err)
			}
			Eventually(t, 2*time.Second, "GET after restart", func() error {
				v, err := Get(ctx, c, "k")
				if err == nil && v != tc.want {
					return fmt.Errorf("got %q, want %q", v, tc.want)
				}
				return err
			})
		})
	}
}

// CheckPartitionDrops partitions node i after writing k=v through its
// proxy, and checks what clients see: a request on an open connection is
// dropped and times out (not refused), and a new connection gets nothing
// back. It returns the client of the open connection.
func CheckPartitionDrops(t *testing.T, b backend.Backend, i int) *redis.Client {
	t.Helper()
	ctx := t.Context()
	c := NewClient(t, b.Nodes()[i].Addr())
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := b.Partition(ctx, i); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := c.Set(ctx, "lost", "x", 0).Err()
	var nerr net.Error
	if !errors.As(err, &nerr) || !nerr.Timeout() {
		t.Fatalf("SET during partition = %v, want a timeout", err)
	}
	if took := time.Since(start); took < 100*time.Millisecond {
		t.Fatalf("SET during partition failed after %v: want a timeout, not a refusal", took)
	}
	if err := NewClient(t, b.Nodes()[i].Addr()).Ping(ctx).Err(); err == nil {
		t.Fatal("a new client got through the partition")
	}
	return c
}
