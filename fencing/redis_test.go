package fencing_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/fencing"
	"github.com/fencedlock/fencedlock/internal/redisproc"
	"github.com/fencedlock/fencedlock/internal/redistest"
)

func TestRedis(t *testing.T) {
	c := redistest.Client(t, redistest.Start(t))
	g := fencing.NewRedis(c)
	testGuard(t, suite{store: g, maxToken: math.MaxUint64, writers: 32, perW: 40})

	t.Run("set", func(t *testing.T) {
		ctx, res := t.Context(), t.Name()
		key := "data:{" + res + "}"
		steps := []struct {
			token uint64
			value string
			stale bool
			want  string // the key's value afterwards
		}{
			{5, "v1", false, "v1"},
			{4, "v2", true, "v1"},
			{5, "v3", false, "v3"},
			{9, "v4", false, "v4"},
			{6, "v5", true, "v4"},
		}
		for _, st := range steps {
			err := g.Set(ctx, res, st.token, key, st.value)
			if st.stale != errors.Is(err, fencing.ErrStaleToken) || (!st.stale && err != nil) {
				t.Fatalf("Set(%d, %q) = %v, want stale %v", st.token, st.value, err, st.stale)
			}
			if got := c.Get(ctx, key).Val(); got != st.want {
				t.Fatalf("after Set(%d, %q): %s = %q, want %q", st.token, st.value, key, got, st.want)
			}
		}
		wantHighest(t, g, res, 9)
	})

	t.Run("invalid argument", func(t *testing.T) {
		res := t.Name()
		tests := []struct {
			name string
			call func(ctx context.Context) error
		}{
			{"resource begins with }", func(ctx context.Context) error { return g.Admit(ctx, "}x", 1) }},
			{"set empty key", func(ctx context.Context) error { return g.Set(ctx, res, 1, "", "v") }},
			{"set the high-water key", func(ctx context.Context) error {
				return g.Set(ctx, res, 1, "fencing:{"+res+"}:token", "v")
			}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				if err := tt.call(t.Context()); !errors.Is(err, fencing.ErrInvalidArgument) {
					t.Errorf("got %v, want ErrInvalidArgument", err)
				}
			})
		}
		wantHighest(t, g, res, 0)
	})

	t.Run("key layout", func(t *testing.T) {
		ctx, res := t.Context(), t.Name()
		if err := g.Append(ctx, res, 42, "e"); err != nil {
			t.Fatal(err)
		}
		if got := c.Get(ctx, "fencing:{"+res+"}:token").Val(); got != "42" {
			t.Errorf("high-water key = %q, want 42", got)
		}
		if got := c.LRange(ctx, "fencing:{"+res+"}:log", 0, -1).Val(); len(got) != 1 || got[0] != "42 e" {
			t.Errorf("log key = %q, want [42 e]", got)
		}
		if ttl := c.TTL(ctx, "fencing:{"+res+"}:token").Val(); ttl != -1 {
			t.Errorf("high-water key has TTL %v, want none", ttl)
		}
		ops := c.Keys(ctx, "fencing:{"+res+"}:op:*").Val()
		if len(ops) != 1 {
			t.Fatalf("op keys %q, want one", ops)
		}
		if ttl := c.PTTL(ctx, ops[0]).Val(); ttl <= 0 || ttl > time.Minute {
			t.Errorf("op key has TTL %v, want the default retry window, 1m", ttl)
		}
	})

	t.Run("retry window", func(t *testing.T) {
		ctx, res := t.Context(), t.Name()
		const window = 5 * time.Second
		if err := fencing.NewRedis(c, fencing.WithRetryWindow(window)).Admit(ctx, res, 1); err != nil {
			t.Fatal(err)
		}
		ops := c.Keys(ctx, "fencing:{"+res+"}:op:*").Val()
		if len(ops) != 1 {
			t.Fatalf("op keys %q, want one", ops)
		}
		for _, k := range ops {
			if ttl := c.PTTL(ctx, k).Val(); ttl <= 0 || ttl > window {
				t.Errorf("op key has TTL %v, want at most %v", ttl, window)
			}
		}
	})

	t.Run("script cache flushed", func(t *testing.T) {
		ctx, res := t.Context(), t.Name()
		mustAdmit(t, g, res, 1)
		if err := c.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		mustAdmit(t, g, res, 2) // NOSCRIPT, then EVAL
		wantHighest(t, g, res, 2)
	})

	t.Run("server down", func(t *testing.T) {
		down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1})
		t.Cleanup(func() { _ = down.Close() })
		err := fencing.NewRedis(down).Admit(t.Context(), t.Name(), 1)
		if err == nil || errors.Is(err, fencing.ErrStaleToken) || errors.Is(err, fencing.ErrInvalidArgument) {
			t.Errorf("Admit on a dead server = %v, want a connection error", err)
		}
	})
}

// TestRedisCluster checks that all keys of one resource share a hash slot, on a
// real one-node Redis Cluster (which rejects scripts that span slots).
func TestRedisCluster(t *testing.T) {
	t.Parallel() // a new cluster master waits ~2 s before it takes writes
	p, err := redisproc.Start(t.Context(), redisproc.Config{Args: []string{"--cluster-enabled", "yes"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	admin := redistest.Client(t, p)
	if err := admin.ClusterAddSlotsRange(t.Context(), 0, 16383).Err(); err != nil {
		t.Fatal(err)
	}
	waitClusterOK(t, admin)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{p.Addr()}})
	t.Cleanup(func() { _ = c.Close() })
	g := fencing.NewRedis(c)
	ctx := t.Context()

	for _, res := range []string{"orders", "a{b", "a}b", "{x}"} {
		t.Run(res, func(t *testing.T) {
			mustAdmit(t, g, res, 1)
			if err := g.Append(ctx, res, 2, "e"); err != nil {
				t.Fatal(err)
			}
			if err := g.Set(ctx, res, 3, "data:{"+res+"}", "v"); err != nil {
				t.Fatal(err)
			}
			wantHighest(t, g, res, 3)
			wantLog(t, g, res, []fencing.Entry{{Token: 2, Data: "e"}})
		})
	}
	t.Run("key in another slot", func(t *testing.T) {
		err := g.Set(ctx, "orders", 4, "elsewhere", "v")
		if err == nil || !strings.Contains(err.Error(), "slot") {
			t.Errorf("Set with a key in another slot = %v, want a cross-slot error", err)
		}
	})
}

// waitClusterOK waits until a fresh one-node cluster has taken its slots.
func waitClusterOK(t *testing.T, c *redis.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		info, err := c.ClusterInfo(ctx).Result()
		if err == nil && strings.Contains(info, "cluster_state:ok") {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("cluster not ok: %v %q", err, info)
		case <-tick.C:
		}
	}
}
