package docker_test

import (
	"context"
	"errors"
	"fmt"
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

	// A primary back within Sentinel's down-after is the primary still,
	// empty, and its replica synchronises from it: the key is gone. One
	// back later (a restart slowed by a loaded machine) has been failed
	// over: the replica, promoted, kept the key, and the restarted server
	// synchronised it from there. Which happened is what Sentinel reports;
	// either way the whole pair agrees.
	promos := backendtest.ListenPromotions(t, b)
	t.Run("restart without data", func(t *testing.T) {
		set(t, "a")
		before, _ := b.DirectAddr(0)
		promoted := len(promos.Nodes())
		t0 := time.Now()
		if err := b.Restart(ctx, 0, false); err != nil {
			t.Fatal(err)
		}
		took := time.Since(t0)
		if after, _ := b.DirectAddr(0); after == before {
			t.Errorf("the primary is still published at %s: was it restarted?", after)
		}
		if err := docker.WaitWhole(b, 0); err != nil {
			t.Fatalf("not a whole pair again: %v", err)
		}
		if len(promos.Nodes()) == promoted {
			t.Logf("restarted without data in %v, within Sentinel's down-after", took)
			gone(t, "a")
			return
		}
		// The replica's copy survives, unless the restarted server came
		// back just as Sentinel failed it over, in time for the replica
		// to synchronise its empty data first: both servers agree.
		rv, rerr := backendtest.Get(ctx, backendtest.NewClient(t, docker.ReplicaAddr(b, 0)), "a")
		pv, perr := backendtest.Get(ctx, c, "a")
		t.Logf("restarted without data in %v, and Sentinel failed it over meanwhile: a = %q", took, pv)
		if perr != nil || rerr != nil || pv != rv {
			t.Errorf("after the failover the primary has a = %q (%v), the replica %q (%v): want them equal", pv, perr, rv, rerr)
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
	// A rate, as the hunt's drift is (schedule.DriftSpec, too small to
	// time here): keys expire by the fast clock.
	t.Run("clock rate", func(t *testing.T) {
		if !docker.HasFaketime(b) {
			t.Skipf("image %s has no libfaketime", b.Image())
		}
		const rate, ttl = 10, 2 * time.Second
		if err := b.SetClockSkew(ctx, 0, fmt.Sprintf("+0 x%d", rate)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := b.SetClockSkew(context.Background(), 0, ""); err != nil {
				t.Error(err)
			}
		})
		if err := c.Set(ctx, "fast", "v", ttl).Err(); err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		backendtest.Eventually(t, ttl, "the key's expiry", func() error {
			if n, err := c.Exists(ctx, "fast").Result(); err != nil || n != 0 {
				return fmt.Errorf("still there (%v)", err)
			}
			return nil
		})
		// At rate 10 it lives ttl/10 of real time; at twice the real rate
		// or less, ttl/2 or more.
		if took := time.Since(t0); took >= ttl/2 {
			t.Fatalf("a key set for %v expired after %v of real time, want about %v", ttl, took, ttl/rate)
		} else {
			t.Logf("a key set for %v expired after %v of real time", ttl, took)
		}
	})
}
