package redistest_test

import (
	"strconv"
	"testing"

	"github.com/fencedlock/fencedlock/internal/redistest"
)

func TestCluster(t *testing.T) {
	procs := redistest.StartCluster(t, 3)
	c := redistest.ClusterClient(t, procs)
	ctx := t.Context()
	// Enough keys to land on every shard; each shard must hold some.
	for i := range 30 {
		if err := c.Set(ctx, "k"+strconv.Itoa(i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range procs {
		if n := redistest.Client(t, p).DBSize(ctx).Val(); n == 0 {
			t.Fatalf("shard %s holds no key", p.Addr())
		}
	}
}

func TestRing(t *testing.T) {
	procs, r := redistest.StartRing(t, 2)
	ctx := t.Context()
	for i := range 30 {
		if err := r.Set(ctx, "k"+strconv.Itoa(i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range procs {
		if n := redistest.Client(t, p).DBSize(ctx).Val(); n == 0 {
			t.Fatalf("shard %s holds no key", p.Addr())
		}
	}
}

func TestSentinel(t *testing.T) {
	s := redistest.StartSentinel(t, "alpha", "beta")
	ctx := t.Context()
	for name, p := range s.Primaries {
		if err := s.FailoverClient(t, name).Set(ctx, "who", name, 0).Err(); err != nil {
			t.Fatal(err)
		}
		if got := redistest.Client(t, p).Get(ctx, "who").Val(); got != name {
			t.Fatalf("primary of %s holds %q", name, got)
		}
	}
}
