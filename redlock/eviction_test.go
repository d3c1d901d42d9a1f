package redlock_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/internal/redistest"
	"github.com/fencedlock/fencedlock/redlock"
)

// The first use of a node checks, in the background, whether its maxmemory
// policy can evict the fence counters; the warning comes once.
func TestEvictionWarnedOnFirstUse(t *testing.T) {
	risky := redistest.Start(t, redistest.WithArgs("--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lru"))
	nodes := []redis.UniversalClient{redistest.Client(t, risky)}
	for _, p := range redistest.StartN(t, 2) {
		nodes = append(nodes, redistest.Client(t, p))
	}
	logs := &recorder{}
	c, err := redlock.New(nodes, redlock.WithLogger(slog.New(logs)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if logs.has(slog.LevelDebug, "eviction policy") {
		t.Fatal("New checked the nodes: it must do no I/O")
	}
	ctx := t.Context()
	for range 2 {
		l, err := c.TryLock(ctx, "k", 10*time.Second) // node timeout 500ms: dials included
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Each node's check ends in a Debug record of the policy it read.
	deadline := time.Now().Add(10 * time.Second)
	for len(logs.find(slog.LevelDebug, "eviction policy")) < len(nodes) {
		if time.Now().After(deadline) {
			t.Fatalf("eviction checks finished: %d of %d", len(logs.find(slog.LevelDebug, "eviction policy")), len(nodes))
		}
		time.Sleep(time.Millisecond) // polling for a background result
	}
	_ = c.Close()
	warns := logs.find(slog.LevelWarn, "evict")
	if len(warns) != 1 {
		t.Fatalf("%d eviction warnings, want one (node 0)", len(warns))
	}
	var node int64 = -1
	warns[0].Attrs(func(a slog.Attr) bool {
		if a.Key == "node" {
			node = a.Value.Int64()
		}
		return true
	})
	if node != 0 {
		t.Fatalf("warned about node %d, want 0", node)
	}
}
