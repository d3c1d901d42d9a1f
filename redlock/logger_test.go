package redlock_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/internal/redistest"
	"github.com/fencedlock/fencedlock/redlock"
)

// captureHandler is a slog.Handler that keeps every record, at every level.
type captureHandler struct {
	mu      sync.Mutex // protects records
	records []slog.Record
}

func (h *captureHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *captureHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	return nil
}
func (h *captureHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *captureHandler) WithGroup(string) slog.Handler      { return h }

// warnings returns, for each Warn record whose message contains substr, its
// attributes as strings.
func (h *captureHandler) warnings(substr string) []map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []map[string]string
	for _, r := range h.records {
		if r.Level != slog.LevelWarn || !strings.Contains(r.Message, substr) {
			continue
		}
		attrs := map[string]string{}
		r.Attrs(func(a slog.Attr) bool {
			attrs[a.Key] = a.Value.String()
			return true
		})
		out = append(out, attrs)
	}
	return out
}

// TestLoggerWarnsOfNodesWithoutContextTimeout: a node client without
// ContextTimeoutEnabled holds a frozen node's connections until its
// ReadTimeout; New says so through the logger, once per such node.
func TestLoggerWarnsOfNodesWithoutContextTimeout(t *testing.T) {
	procs := redistest.StartN(t, 3)
	client := func(i int, ctxTimeout bool) redis.UniversalClient {
		c := redis.NewClient(&redis.Options{Addr: procs[i].Addr(), ContextTimeoutEnabled: ctxTimeout})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	for _, tc := range []struct {
		name    string
		enabled []bool // per node: ContextTimeoutEnabled
		warned  []string
	}{
		{"all enabled", []bool{true, true, true}, nil},
		{"two without", []bool{true, false, false}, []string{"1", "2"}},
		{"none enabled", []bool{false, false, false}, []string{"0", "1", "2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := make([]redis.UniversalClient, len(tc.enabled))
			for i, on := range tc.enabled {
				nodes[i] = client(i, on)
			}
			h := &captureHandler{}
			c, err := redlock.New(nodes, redlock.WithLogger(slog.New(h)))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var warned []string
			for _, attrs := range h.warnings("ContextTimeoutEnabled") {
				warned = append(warned, attrs["node"])
				if i, err := strconv.Atoi(attrs["node"]); err != nil || i < 0 || i >= len(procs) {
					t.Errorf("warning names node %q", attrs["node"])
				} else if attrs["addr"] != procs[i].Addr() {
					t.Errorf("warning for node %d names address %q, want %q", i, attrs["addr"], procs[i].Addr())
				}
			}
			slices.Sort(warned)
			if !slices.Equal(warned, tc.warned) {
				t.Errorf("ContextTimeoutEnabled warnings for nodes %v, want %v", warned, tc.warned)
			}
		})
	}
}

// TestLoggerWarnsOfLostLock: a hold that ends other than by Unlock is
// logged at Warn with its key and token.
func TestLoggerWarnsOfLostLock(t *testing.T) {
	r := newRig(t, 3)
	h := &captureHandler{}
	c := r.client(t, redlock.WithLogger(slog.New(h)))
	ctx := t.Context()
	l, err := c.TryLock(ctx, "k", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(h.warnings("lock lost")); n != 0 {
		t.Fatalf("%d lock-lost warnings before the loss", n)
	}
	for _, rc := range r.clients {
		rc.Del(ctx, "k")
	}
	if err := l.Extend(ctx, time.Minute); !errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("Extend of a vanished key: %v, want ErrLockLost", err)
	}
	w := h.warnings("lock lost")
	if len(w) != 1 || w[0]["key"] != "k" || w[0]["token"] != strconv.FormatUint(l.Token(), 10) {
		t.Fatalf("lock-lost warnings %v, want one for key k, token %d", w, l.Token())
	}
}
