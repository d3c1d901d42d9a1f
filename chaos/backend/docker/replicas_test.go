package docker_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/chaos/backend"
	"github.com/fencedlock/fencedlock/chaos/backend/backendtest"
	"github.com/fencedlock/fencedlock/chaos/backend/docker"
)

// The faults a plain node gets from a new container, a pair's server gets
// in the container it has, so that it keeps its address on the network,
// where Sentinel knows it: its primary restarts without data (at once, or
// after a kill that Sentinel fails over), and runs on a skewed clock. The
// node is a whole pair again after each.
func TestDockerReplicatedNodeAmnesiaAndClockSkew(t *testing.T) {
	b := newDockerBackend(t, 1, docker.WithReplicas(replicaTTL))
	ctx := t.Context()
	c := backendtest.NewClient(t, b.Nodes()[0].Addr())
	// set writes key through the node and waits until the replica has it,
	// so that what a fault loses is lost on both servers.
	set := func(t *testing.T, key string) {
		t.Helper()
		if n := backendtest.SetAndWait(t, c, key, backendtest.WaitLimit); n != 1 {
			t.Fatalf("SET %s: %d replicas acknowledged it, want 1", key, n)
		}
	}
	// gone checks that key is on neither server of the whole pair.
	gone := func(t *testing.T, key string) {
		t.Helper()
		t0 := time.Now()
		if err := docker.WaitWhole(b, 0); err != nil {
			t.Fatalf("not a whole pair again: %v", err)
		}
		t.Logf("whole again in %v", time.Since(t0))
		for name, cl := range map[string]*redis.Client{"primary": c, "replica": backendtest.NewClient(t, docker.ReplicaAddr(b, 0))} {
			if v, err := backendtest.Get(ctx, cl, key); err != nil || v != "" {
				t.Errorf("the %s has %s = %q (%v), want it gone", name, key, v, err)
			}
		}
	}

	t.Run("restart without data", func(t *testing.T) {
		set(t, "a")
		before, _ := b.DirectAddr(0)
		t0 := time.Now()
		if err := b.Restart(ctx, 0, false); err != nil {
			t.Fatal(err)
		}
		t.Logf("restarted without data in %v", time.Since(t0))
		if v, err := backendtest.Get(ctx, c, "a"); err != nil || v != "" {
			t.Fatalf("after the restart a = %q (%v), want it gone", v, err)
		}
		gone(t, "a")
		if after, _ := b.DirectAddr(0); after == before {
			t.Errorf("the primary is still published at %s: was it restarted?", after)
		}
	})

	// Down for longer than Sentinel's down-after, as the hunt's delayed
	// restart is: Sentinel promotes the replica, which is then restarted
	// empty; the old primary, started again, is made its replica.
	t.Run("delayed restart", func(t *testing.T) {
		set(t, "b")
		if err := b.Kill(ctx, 0); err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		backendtest.Eventually(t, backendtest.WaitLimit, "a write through the node's address", func() error {
			return c.Set(ctx, "after-kill", "v", 0).Err()
		})
		t.Logf("Sentinel failed the killed primary over in %v", time.Since(t0))
		if err := b.Restart(ctx, 0, false); err != nil {
			t.Fatal(err)
		}
		if err := b.Start(ctx, 0); err != nil {
			t.Fatal(err)
		}
		gone(t, "b")
		gone(t, "after-kill")
	})

	t.Run("clock skew", func(t *testing.T) {
		if !docker.HasFaketime(b) {
			if err := b.SetClockSkew(ctx, 0, "+1h"); !errors.Is(err, backend.ErrNoFaketime) {
				t.Fatalf("clock skew without libfaketime in %s: %v, want ErrNoFaketime", b.Image(), err)
			}
			t.Skipf("image %s has no libfaketime", b.Image())
		}
		const skew = time.Hour
		set(t, "kept")
		// off is how far the node's clock is from this machine's; a
		// clock on skew is off by it, give or take half of it.
		off := func() time.Duration { return time.Until(backendtest.ServerTime(t, c)) }
		t0 := time.Now()
		if err := b.SetClockSkew(ctx, 0, "+1h"); err != nil {
			t.Fatal(err)
		}
		t.Logf("skewed in %v", time.Since(t0))
		if d := off(); d < skew/2 || d > skew*3/2 {
			t.Fatalf("the primary's clock is off by %v, want about %v", d, skew)
		}
		if v, err := backendtest.Get(ctx, c, "kept"); err != nil || v != "v" {
			t.Fatalf("after the skew kept = %q (%v), want its value", v, err)
		}
		if err := docker.WaitWhole(b, 0); err != nil {
			t.Fatalf("not a whole pair again: %v", err)
		}
		if err := b.SetClockSkew(ctx, 0, ""); err != nil {
			t.Fatal(err)
		}
		if d := off(); d > skew/2 || d < -skew/2 {
			t.Fatalf("the primary's clock is off by %v after the skew ended, want about 0", d)
		}
		if err := docker.WaitWhole(b, 0); err != nil {
			t.Fatalf("not a whole pair again: %v", err)
		}
	})
}
