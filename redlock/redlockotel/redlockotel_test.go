package redlockotel_test

import (
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/fencedlock/fencedlock/internal/redistest"
	"github.com/fencedlock/fencedlock/redlock"
	"github.com/fencedlock/fencedlock/redlock/redlockotel"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func attr(s sdktrace.ReadOnlySpan, k attribute.Key) (attribute.Value, bool) {
	for _, a := range s.Attributes() {
		if a.Key == k {
			return a.Value, true
		}
	}
	return attribute.Value{}, false
}

// TestSpans: a span per acquire, extend and unlock, with the token, the key
// (opt-in) or its hash, the outcome, node events, and an error status for a
// refused acquisition.
func TestSpans(t *testing.T) {
	procs := redistest.StartN(t, 3)
	for _, tc := range []struct {
		name string
		opts []redlockotel.Option
		keys bool
	}{
		{"key hashed by default", nil, false},
		{"WithKeys", []redlockotel.Option{redlockotel.WithKeys()}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
			c, err := redlock.New(redistest.Clients(t, procs),
				redlock.WithObserver(redlockotel.New(tp, tc.opts...)), redlock.WithNodeTimeout(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx := t.Context()
			key := "otel:" + t.Name()
			l, err := c.TryLock(ctx, key, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.TryLock(ctx, key, time.Minute); !errors.Is(err, redlock.ErrNotAcquired) {
				t.Fatalf("second TryLock: %v", err)
			}
			if err := l.Extend(ctx, time.Minute); err != nil {
				t.Fatal(err)
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}

			spans := rec.Ended()
			want := []struct {
				name    string
				token   uint64
				outcome string
				failed  bool
			}{
				{"fencedlock.acquire", l.Token(), "acquired", false},
				{"fencedlock.acquire", 0, "refused", true},
				{"fencedlock.extend", l.Token(), "", false},
				{"fencedlock.unlock", l.Token(), "", false},
			}
			if len(spans) != len(want) {
				t.Fatalf("%d spans ended, want %d", len(spans), len(want))
			}
			for i, w := range want {
				s := spans[i]
				if s.Name() != w.name {
					t.Errorf("span %d: %q, want %q", i, s.Name(), w.name)
				}
				tok, ok := attr(s, redlockotel.TokenAttr)
				if w.token > 0 && (!ok || tok.AsInt64() != int64(w.token)) {
					t.Errorf("span %d (%s): token %v, want %d", i, s.Name(), tok.String(), w.token)
				}
				if w.token == 0 && ok {
					t.Errorf("span %d (%s): token %v on a failed acquisition", i, s.Name(), tok.String())
				}
				if o, _ := attr(s, redlockotel.OutcomeAttr); o.AsString() != w.outcome {
					t.Errorf("span %d (%s): outcome %q, want %q", i, s.Name(), o.AsString(), w.outcome)
				}
				k, hasKey := attr(s, redlockotel.KeyAttr)
				h, hasHash := attr(s, redlockotel.KeyHashAttr)
				if tc.keys && (!hasKey || k.AsString() != key || hasHash) {
					t.Errorf("span %d: key %q, hash %q; want the key %q and no hash", i, k.AsString(), h.AsString(), key)
				}
				if !tc.keys && (hasKey || !hasHash || len(h.AsString()) != 16) {
					t.Errorf("span %d: key %q, hash %q; want no key and a 16-digit hash", i, k.AsString(), h.AsString())
				}
				if (s.Status().Code == codes.Error) != w.failed {
					t.Errorf("span %d (%s): status %v, want failed %v", i, s.Name(), s.Status(), w.failed)
				}
				replies := 0
				for _, e := range s.Events() {
					if e.Name == "fencedlock.node_reply" {
						replies++
					}
				}
				if replies < c.Quorum() {
					t.Errorf("span %d (%s): %d node replies, want at least a quorum (%d): %v", i, s.Name(), replies, c.Quorum(), s.Events())
				}
			}
			if h0, _ := attr(spans[0], redlockotel.KeyHashAttr); !tc.keys {
				if h1, _ := attr(spans[3], redlockotel.KeyHashAttr); h0 != h1 {
					t.Errorf("one key, two hashes: %v, %v", h0.String(), h1.String())
				}
			}
		})
	}
}

// TestNodeErrorEvents: with two of three nodes dead, an acquisition
// waits for their failures (no quorum can be had without them): each is an
// error event of its span, and the outcome is node_error.
func TestNodeErrorEvents(t *testing.T) {
	procs := redistest.StartN(t, 3)
	clients := redistest.Clients(t, procs)
	for _, p := range procs[1:] {
		if err := p.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	c, err := redlock.New(clients, redlock.WithObserver(redlockotel.New(tp)), redlock.WithNodeTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.TryLock(t.Context(), "otel:dead-nodes", time.Minute); !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("TryLock with two of three nodes dead: %v, want ErrNotAcquired", err)
	}
	spans := rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	s := spans[0]
	if o, _ := attr(s, redlockotel.OutcomeAttr); o.AsString() != "node_error" {
		t.Errorf("outcome %q, want node_error", o.AsString())
	}
	failed := map[int64]bool{}
	for _, e := range s.Events() {
		if e.Name != "fencedlock.node_error" {
			continue
		}
		for _, a := range e.Attributes {
			if a.Key == redlockotel.NodeAttr {
				failed[a.Value.AsInt64()] = true
			}
		}
	}
	if !failed[1] || !failed[2] || failed[0] {
		t.Errorf("node_error events of nodes %v, want 1 and 2: %v", failed, s.Events())
	}
}
