package process_test

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/chaos/backend"
	"github.com/fencedlock/fencedlock/chaos/backend/backendtest"
	"github.com/fencedlock/fencedlock/chaos/backend/process"
)

func TestClockSkewOffset(t *testing.T) {
	backendtest.RequireFaketime(t)
	b := newBackend(t, 1)
	ctx := t.Context()
	c := backendtest.NewClient(t, b.Nodes()[0].Addr())
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := b.SetClockSkew(ctx, 0, "+30s"); err != nil {
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
}

// TestClockSkewRateExpiresKeysEarly checks that "+0 x2" reaches what Redis
// expires keys by, not just TIME: a key with PX 600 is gone in about 300ms.
func TestClockSkewRateExpiresKeysEarly(t *testing.T) {
	backendtest.RequireFaketime(t)
	b := newBackend(t, 1)
	ctx := t.Context()
	c := backendtest.NewClient(t, b.Nodes()[0].Addr())
	if err := b.SetClockSkew(ctx, 0, "+0 x2"); err != nil {
		t.Fatal(err)
	}

	// TIME advances at twice the real rate.
	real0, srv0 := time.Now(), backendtest.ServerTime(t, c)
	backendtest.Eventually(t, 2*time.Second, "200ms of real time", func() error {
		if time.Since(real0) < 200*time.Millisecond {
			return errors.New("not yet")
		}
		return nil
	})
	real1, srv1 := time.Now(), backendtest.ServerTime(t, c)
	rate := float64(srv1.Sub(srv0)) / float64(real1.Sub(real0))
	t.Logf("server clock rate %.2f", rate)
	if rate < 1.5 || rate > 2.5 {
		t.Fatalf("server clock runs at %.2f times real time, want about 2", rate)
	}

	// A key's PX runs out twice as fast.
	const px = 600 * time.Millisecond
	start := time.Now()
	if err := c.Set(ctx, "k", "v", px).Err(); err != nil {
		t.Fatal(err)
	}
	backendtest.Eventually(t, 2*time.Second, "key expiry", func() error {
		n, err := c.Exists(ctx, "k").Result()
		if err == nil && n != 0 {
			return errors.New("key still there")
		}
		return err
	})
	took := time.Since(start)
	t.Logf("key with PX %v expired after %v of real time", px, took)
	if took >= px*5/6 {
		t.Fatalf("key with PX %v expired after %v of real time, want about %v", px, took, px/2)
	}
}

func TestClockSkewWithoutFaketime(t *testing.T) {
	b := newBackend(t, 1, process.WithFaketime(filepath.Join(t.TempDir(), "libfaketime.so.1")))
	ctx := t.Context()
	if err := b.SetClockSkew(ctx, 0, "+30s"); !errors.Is(err, backend.ErrNoFaketime) {
		t.Fatalf("SetClockSkew without libfaketime = %v, want ErrNoFaketime", err)
	}
	// Removing a skew needs no libfaketime.
	if err := b.SetClockSkew(ctx, 0, ""); err != nil {
		t.Fatal(err)
	}
	if err := backendtest.NewClient(t, b.Nodes()[0].Addr()).Ping(ctx).Err(); err != nil {
		t.Fatalf("node after a refused skew: %v", err)
	}
}

func TestClockSkewBadSpec(t *testing.T) {
	b := newBackend(t, 1)
	for _, spec := range []string{" +1s", "x2", "+1s\n", "now"} {
		if err := b.SetClockSkew(t.Context(), 0, spec); err == nil {
			t.Errorf("spec %q accepted", spec)
		}
	}
	if err := backendtest.NewClient(t, b.Nodes()[0].Addr()).Ping(t.Context()).Err(); err != nil {
		t.Fatalf("node after rejected specs: %v", err)
	}
}
