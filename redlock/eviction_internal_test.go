package redlock

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/internal/redistest"
)

// A node whose maxmemory policy can evict the fence counters or the lock
// keys gets one warning; safe nodes and nodes whose CONFIG cannot be read
// get none (the latter a Debug record).
func TestEvictionCheck(t *testing.T) {
	t.Parallel() // waits on servers starting and calls timing out, not on timing: runs beside the others of its kind
	limit := func(policy string) redistest.Option {
		return redistest.WithArgs("--maxmemory", "100mb", "--maxmemory-policy", policy)
	}
	plain := func(opts ...redistest.Option) func(*testing.T) redis.UniversalClient {
		return func(t *testing.T) redis.UniversalClient { return redistest.Client(t, redistest.Start(t, opts...)) }
	}
	const counters, lockKeys = "fence counters", "can evict lock keys"
	cases := []struct {
		name string
		node func(*testing.T) redis.UniversalClient
		warn string // "" for none
	}{
		{"allkeys-lru", plain(limit("allkeys-lru")), counters},
		{"allkeys-lfu", plain(limit("allkeys-lfu")), counters},
		{"allkeys-random", plain(limit("allkeys-random")), counters},
		{"volatile-lru", plain(limit("volatile-lru")), lockKeys},
		{"volatile-lfu", plain(limit("volatile-lfu")), lockKeys},
		{"volatile-random", plain(limit("volatile-random")), lockKeys},
		{"volatile-ttl", plain(limit("volatile-ttl")), lockKeys},
		{"noeviction", plain(limit("noeviction")), ""},
		{"no maxmemory", plain(redistest.WithArgs("--maxmemory", "0", "--maxmemory-policy", "allkeys-lru")), ""},
		{"default config", plain(), ""},
		{"CONFIG renamed", plain(limit("allkeys-lru"), redistest.WithArgs("--rename-command", "CONFIG", "")), ""},
		{"ring with one allkeys shard", func(t *testing.T) redis.UniversalClient {
			safe, risky := redistest.Start(t, limit("noeviction")), redistest.Start(t, limit("allkeys-lru"))
			r := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"safe": safe.Addr(), "risky": risky.Addr()}})
			t.Cleanup(func() { _ = r.Close() })
			return r
		}, counters},
		{"cluster with volatile-lru", func(t *testing.T) redis.UniversalClient {
			return redistest.ClusterClient(t, redistest.StartCluster(t, 3, limit("volatile-lru")))
		}, lockKeys},
	}
	nodes := make([]redis.UniversalClient, len(cases))
	for i, tc := range cases {
		nodes[i] = tc.node(t)
	}
	logs := &records{}
	// The check's bound is generous here: what is tested is the verdict.
	c, err := New(nodes, WithLogger(slog.New(logs)), WithNodeTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	for range 2 { // a second use must not check again
		for i := range nodes {
			c.checkNode(i)
		}
	}
	// Every check ends in a Debug record per node: the policy read, or why
	// it could not be.
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; i < len(nodes); {
		if len(logs.find(slog.LevelDebug, i, "eviction policy")) > 0 {
			i++
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %d (%s): no eviction check finished", i, cases[i].name)
		}
		time.Sleep(time.Millisecond) // polling for a background result
	}
	_ = c.Close()
	for i, tc := range cases {
		warns := logs.find(slog.LevelWarn, i, "evict")
		switch {
		case tc.warn == "" && len(warns) > 0:
			t.Errorf("%s: warned %q", tc.name, warns[0])
		case tc.warn != "" && len(warns) != 1:
			t.Errorf("%s: %d warnings %q, want one", tc.name, len(warns), warns)
		case tc.warn != "" && !strings.Contains(warns[0], tc.warn):
			t.Errorf("%s: warned %q, want it to say %q", tc.name, warns[0], tc.warn)
		}
	}
	const renamed = 10
	if cases[renamed].name != "CONFIG renamed" || len(logs.find(slog.LevelDebug, renamed, "could not read")) != 1 {
		t.Errorf("CONFIG renamed: no Debug record of the failed read")
	}
}

// records is a slog.Handler that keeps every record as "message attrs".
type records struct {
	mu   sync.Mutex // protects recs
	recs []record
}

type record struct {
	level slog.Level
	node  int64
	text  string
}

func (*records) Enabled(context.Context, slog.Level) bool { return true }
func (h *records) Handle(_ context.Context, r slog.Record) error {
	rec := record{level: r.Level, node: -1, text: r.Message}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "node" {
			rec.node = a.Value.Int64()
		}
		rec.text += " " + a.String()
		return true
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, rec)
	return nil
}
func (h *records) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *records) WithGroup(string) slog.Handler      { return h }

// find returns the texts of the records at level about node that contain
// substr.
func (h *records) find(level slog.Level, node int, substr string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, r := range h.recs {
		if r.level == level && r.node == int64(node) && strings.Contains(r.text, substr) {
			out = append(out, r.text)
		}
	}
	return out
}
