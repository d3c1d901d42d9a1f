package docker_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/chaos/backend"
	"github.com/fencedlock/fencedlock/chaos/backend/backendtest"
	"github.com/fencedlock/fencedlock/chaos/backend/docker"
)

func TestDockerNodes(t *testing.T) {
	b := newDockerBackend(t, 3)
	backendtest.CheckNodes(t, b, 3)
	for i := range 3 {
		if nets := networks(t, b, i); !strings.Contains(nets, b.Network()+"=") || !strings.Contains(nets, fmt.Sprintf("node%d", i)) {
			t.Errorf("node %d: networks %q, want %s with alias node%d", i, nets, b.Network(), i)
		}
	}
	// The nodes see each other by alias on their private network.
	if err := pingByAlias(t, b, 0, 2); err != nil {
		t.Errorf("node 0 -> node2: %v", err)
	}
	labels, err := dockerCLI(t.Context(), "inspect", "--format", "{{json .Config.Labels}}", containerID(t, b, 1))
	if err != nil || !strings.Contains(labels, `"`+docker.LabelChaos+`":"1"`) || !strings.Contains(labels, docker.LabelOwner) {
		t.Errorf("labels %s (%v): want %s and %s", labels, err, docker.LabelChaos, docker.LabelOwner)
	}
}

func TestDockerBadNodeIndex(t *testing.T) {
	b := newDockerBackend(t, 1)
	backendtest.CheckBadNodeIndex(t, b, map[string]func(int) error{
		"Container": func(i int) error { _, err := b.ContainerID(i); return err },
	})
	if err := b.FailOver(t.Context(), 0, 0); !errors.Is(err, backend.ErrUnsupported) {
		t.Errorf("FailOver without replicas: %v, want ErrUnsupported", err)
	}
	if err := b.FailOver(t.Context(), 0, -time.Second); err == nil {
		t.Error("FailOver with a negative lag accepted")
	}
	for _, spec := range []string{" +1s", "x2", "now"} {
		if err := b.SetClockSkew(t.Context(), 0, spec); err == nil {
			t.Errorf("clock skew %q accepted", spec)
		}
	}
}

func TestDockerKillAndStartKeepData(t *testing.T) {
	b := newDockerBackend(t, 2)
	before, _ := b.DirectAddr(1)
	backendtest.CheckKillAndStartKeepData(t, b, func() {
		if _, err := b.DirectAddr(1); err == nil {
			t.Fatal("a killed node has a published port")
		}
	})
	after, _ := b.DirectAddr(1)
	t.Logf("published port before the kill %s, after the start %s; clients keep %s", before, after, b.Nodes()[1].Addr())
}

func TestDockerRestart(t *testing.T) {
	backendtest.CheckRestart(t, func(t *testing.T) backend.Backend { return newDockerBackend(t, 1) })
}

func TestDockerPauseAndResume(t *testing.T) {
	b := newDockerBackend(t, 1)
	ctx := t.Context()
	c := backendtest.NewClient(t, b.Nodes()[0].Addr())
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := b.Pause(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if err := b.Pause(ctx, 0); err != nil {
		t.Fatalf("second Pause: %v", err)
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
	if err := b.Resume(ctx, 0); err != nil {
		t.Fatalf("Resume of a running node: %v", err)
	}
	// A paused node can be killed, and starts again with its data.
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := b.Pause(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if err := b.Restart(ctx, 0, true); err != nil {
		t.Fatalf("Restart of a paused node: %v", err)
	}
	backendtest.Eventually(t, 2*time.Second, "GET after restarting a paused node", func() error {
		v, err := backendtest.Get(ctx, c, "k")
		if err == nil && v != "v" {
			return fmt.Errorf("got %q", v)
		}
		return err
	})
}

func TestDockerPartitionAndHeal(t *testing.T) {
	b := newDockerBackend(t, 2)
	ctx := t.Context()
	c := backendtest.CheckPartitionDrops(t, b, 1)
	// The container is off its network: other containers cannot reach it.
	if nets := networks(t, b, 1); strings.Contains(nets, b.Network()) {
		t.Fatalf("partitioned container is still on %s: %q", b.Network(), nets)
	}
	if err := pingByAlias(t, b, 0, 1); err == nil {
		t.Fatal("node 0 reached node1 by alias during the partition")
	}
	// Other nodes are not affected.
	if err := backendtest.NewClient(t, b.Nodes()[0].Addr()).Ping(ctx).Err(); err != nil {
		t.Fatalf("node 0 during node 1's partition: %v", err)
	}

	if err := b.Heal(ctx, 1); err != nil {
		t.Fatal(err)
	}
	backendtest.Eventually(t, 2*time.Second, "GET through the same client after heal", func() error {
		v, err := backendtest.Get(ctx, c, "k")
		if err == nil && v != "v" {
			return fmt.Errorf("got %q", v)
		}
		return err
	})
	if v, err := backendtest.Get(ctx, c, "lost"); err != nil || v != "" {
		t.Fatalf("SET sent during the partition reached the node: %q, %v", v, err)
	}
	if nets := networks(t, b, 1); !strings.Contains(nets, b.Network()+"=") || !strings.Contains(nets, "node1") {
		t.Fatalf("healed container's networks %q: want %s with alias node1", nets, b.Network())
	}
	if err := pingByAlias(t, b, 0, 1); err != nil {
		t.Fatalf("node 0 -> node1 after heal: %v", err)
	}
}

// TestDockerPartitionOfStoppedNode: a node killed during a partition starts
// again cut off, and the heal brings it back.
func TestDockerPartitionOfStoppedNode(t *testing.T) {
	b := newDockerBackend(t, 1)
	ctx := t.Context()
	c := backendtest.NewClient(t, b.Nodes()[0].Addr())
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	for _, step := range []func() error{
		func() error { return b.Partition(ctx, 0) },
		func() error { return b.Kill(ctx, 0) },
		func() error { return b.Start(ctx, 0) },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("a node started during its partition answered")
	}
	if err := b.Heal(ctx, 0); err != nil {
		t.Fatal(err)
	}
	backendtest.Eventually(t, 2*time.Second, "GET after heal", func() error {
		v, err := backendtest.Get(ctx, c, "k")
		if err == nil && v != "v" {
			return fmt.Errorf("got %q", v)
		}
		return err
	})
}

func TestDockerLatency(t *testing.T) {
	b := newDockerBackend(t, 1)
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
