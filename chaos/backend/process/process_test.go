package process_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/chaos/backend"
	"github.com/fencedlock/fencedlock/chaos/backend/backendtest"
	"github.com/fencedlock/fencedlock/chaos/backend/process"
)

func TestProcessNodes(t *testing.T) { backendtest.CheckNodes(t, newBackend(t, 3), 3) }

func TestProcessBadNodeIndex(t *testing.T) {
	b := newBackend(t, 1)
	backendtest.CheckBadNodeIndex(t, b, map[string]func(i int) error{
		"FailOver": func(i int) error { return b.FailOver(t.Context(), i, 0) },
		"Rejoin":   func(i int) error { return b.Rejoin(t.Context(), i) },
	})
}

func TestProcessKillAndStartKeepData(t *testing.T) {
	backendtest.CheckKillAndStartKeepData(t, newBackend(t, 3), nil)
}

func TestProcessRestart(t *testing.T) {
	backendtest.CheckRestart(t, func(t *testing.T) backend.Backend { return newBackend(t, 1) })
}

func TestProcessPauseAndResume(t *testing.T) {
	b := newBackend(t, 1)
	ctx := t.Context()
	c := backendtest.NewClient(t, b.Nodes()[0].Addr())
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
	backendtest.Eventually(t, 2*time.Second, "PING after resume", func() error { return c.Ping(ctx).Err() })
}

func TestProcessPartitionAndHeal(t *testing.T) {
	b := newBackend(t, 3)
	ctx := t.Context()
	c := backendtest.CheckPartitionDrops(t, b, 2)
	// The node itself is fine, and the dropped SET never reached it.
	direct, err := b.DirectAddr(2)
	if err != nil {
		t.Fatal(err)
	}
	dc := backendtest.NewClient(t, direct)
	if v, err := backendtest.Get(ctx, dc, "k"); err != nil || v != "v" {
		t.Fatalf("direct GET during partition = %q, %v", v, err)
	}
	// Other nodes are not affected.
	if err := backendtest.NewClient(t, b.Nodes()[0].Addr()).Ping(ctx).Err(); err != nil {
		t.Fatalf("node 0 during node 2's partition: %v", err)
	}

	if err := b.Heal(ctx, 2); err != nil {
		t.Fatal(err)
	}
	backendtest.Eventually(t, 2*time.Second, "GET through the same client after heal", func() error {
		v, err := backendtest.Get(ctx, c, "k")
		if err == nil && v != "v" {
			return fmt.Errorf("got %q", v)
		}
		return err
	})
	if v, err := backendtest.Get(ctx, dc, "lost"); err != nil || v != "" {
		t.Fatalf("SET sent during the partition reached the node: %q, %v", v, err)
	}
}

func TestProcessLatency(t *testing.T) {
	b := newBackend(t, 1)
	ctx := t.Context()
	c := redis.NewClient(&redis.Options{Addr: b.Nodes()[0].Addr(), ReadTimeout: 30 * time.Second, MaxRetries: -1, PoolSize: 1})
	t.Cleanup(func() { _ = c.Close() })
	d := backendtest.LatencyFor(backendtest.MinRTT(t, c, 5))
	if err := b.SetLatency(ctx, 0, d); err != nil {
		t.Fatal(err)
	}
	if got := backendtest.MinRTT(t, c, 3); got < d {
		t.Fatalf("PING with %v latency took %v", d, got)
	}
	if err := b.SetLatency(ctx, 0, 0); err != nil {
		t.Fatal(err)
	}
	if got := backendtest.MinRTT(t, c, 5); got >= d {
		t.Fatalf("PING after latency removed still takes %v", got)
	}
}

func TestProcessCloseIsFinal(t *testing.T) {
	b, err := process.New(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	addr := b.Nodes()[0].Addr()
	c := backendtest.NewClient(t, addr)
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
	b, err := process.New(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	c := backendtest.NewClient(t, b.Nodes()[0].Addr())
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
