package docker_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/chaos/backend"
	"github.com/fencedlock/fencedlock/chaos/backend/backendtest"
	"github.com/fencedlock/fencedlock/chaos/backend/docker"
	"github.com/fencedlock/fencedlock/chaos/internal/testenv"
)

func TestDockerClockSkew(t *testing.T) {
	b := newDockerBackend(t, 1)
	ctx := t.Context()
	c := backendtest.NewClient(t, b.Nodes()[0].Addr())
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	err := b.SetClockSkew(ctx, 0, "+30s")
	if errors.Is(err, backend.ErrNoFaketime) {
		testenv.SkipOrFail(t, "image %s: %v\nscripts/redis-image.sh builds one with libfaketime", b.Image(), err)
	}
	if err != nil {
		t.Fatal(err)
	}
	off := time.Until(backendtest.ServerTime(t, c))
	t.Logf("TIME is %v ahead", off)
	if off < 25*time.Second || off > 35*time.Second {
		t.Fatalf("skewed node's TIME is %v off, want about +30s", off)
	}
	if v, err := backendtest.Get(ctx, c, "k"); err != nil || v != "v" {
		t.Fatalf("data after skew restart: %q, %v", v, err)
	}
	// The skew survives a restart until it is removed.
	if err := b.Restart(ctx, 0, true); err != nil {
		t.Fatal(err)
	}
	if off := time.Until(backendtest.ServerTime(t, c)); off < 25*time.Second {
		t.Fatalf("after restart TIME is %v off, want the skew kept", off)
	}
	if err := b.SetClockSkew(ctx, 0, ""); err != nil {
		t.Fatal(err)
	}
	if off := time.Until(backendtest.ServerTime(t, c)); off < -5*time.Second || off > 5*time.Second {
		t.Fatalf("after removing the skew TIME is %v off", off)
	}
	if v, err := backendtest.Get(ctx, c, "k"); err != nil || v != "v" {
		t.Fatalf("data after the skew was removed: %q, %v", v, err)
	}
}

func TestDockerCloseIsFinal(t *testing.T) {
	b := newDockerBackend(t, 1)
	ctx := t.Context()
	addr, id := b.Nodes()[0].Addr(), containerID(t, b, 0)
	c := backendtest.NewClient(t, addr)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	// An hour of latency holds a request in the proxy: Close must not wait
	// for it, nor leave it behind (goleak checks at the end of the run).
	if err := b.SetLatency(ctx, 0, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING came back through an hour of latency")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := b.Kill(ctx, 0); !errors.Is(err, backend.ErrClosed) {
		t.Fatalf("Kill after Close = %v, want ErrClosed", err)
	}
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("node answered after Close")
	}
	if out, err := dockerCLI(ctx, "inspect", id); err == nil {
		t.Fatalf("container %.12s still there after Close: %s", id, out)
	}
}

// TestSweepDocker: resources whose owner process is gone are removed, those
// of live processes are not.
func TestSweepDocker(t *testing.T) {
	testenv.RequireDocker(t)
	ctx := t.Context()
	hostname, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	dead := fmt.Sprintf("sweep-dead-%d", time.Now().UnixNano())
	live := fmt.Sprintf("sweep-live-%d", time.Now().UnixNano())
	for name, owner := range map[string]string{
		dead: hostname + "/999999999", // no such pid
		live: hostname + "/1",         // init: alive
	} {
		if out, err := dockerCLI(ctx, "volume", "create",
			"--label", docker.LabelChaos+"=1", "--label", docker.LabelOwner+"="+owner, name); err != nil {
			t.Fatalf("docker volume create: %v: %s", err, out)
		}
	}
	t.Cleanup(func() { _, _ = dockerCLI(context.Background(), "volume", "rm", "-f", dead, live) })
	n, err := docker.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n < 1 {
		t.Errorf("SweepDocker removed %d, want the dead owner's volume", n)
	}
	if _, err := dockerCLI(ctx, "volume", "inspect", dead); err == nil {
		t.Errorf("volume %s of a dead process survived the sweep", dead)
	}
	if out, err := dockerCLI(ctx, "volume", "inspect", live); err != nil {
		t.Errorf("volume %s of a live process was swept: %s", live, out)
	}
}
