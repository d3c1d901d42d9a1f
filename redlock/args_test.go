package redlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/redlock"
)

func TestNewRejectsBadNodes(t *testing.T) {
	a := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	b := redis.NewClient(&redis.Options{Addr: "127.0.0.1:2"})
	same := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { a.Close(); b.Close(); same.Close() })
	var nilClient *redis.Client
	for _, tc := range []struct {
		name  string
		nodes []redis.UniversalClient
	}{
		{"no nodes", nil},
		{"nil node", []redis.UniversalClient{a, nil}},
		{"typed nil node", []redis.UniversalClient{a, nilClient}},
		{"same address twice", []redis.UniversalClient{a, b, same}},
		{"same client twice", []redis.UniversalClient{a, b, a}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := redlock.New(tc.nodes)
			if !errors.Is(err, redlock.ErrInvalidArgument) {
				t.Fatalf("New: %v, want ErrInvalidArgument", err)
			}
			if c != nil {
				t.Fatal("New returned a client with an error")
			}
		})
	}
}

func TestBadLockArguments(t *testing.T) {
	r := newRig(t, 3)
	c := r.client(t)
	ctx := t.Context()
	fn := func(context.Context, *redlock.Lock) error { return nil }
	calls := map[string]func(key string, ttl time.Duration) error{
		"TryLock": func(k string, ttl time.Duration) error { _, err := c.TryLock(ctx, k, ttl); return err },
		"Lock":    func(k string, ttl time.Duration) error { _, err := c.Lock(ctx, k, ttl); return err },
		"Do":      func(k string, ttl time.Duration) error { return c.Do(ctx, k, ttl, fn) },
	}
	for name, call := range calls {
		for _, tc := range []struct {
			name string
			key  string
			ttl  time.Duration
		}{
			{"empty key", "", time.Second},
			{"zero ttl", "k", 0},
			{"negative ttl", "k", -time.Second},
			{"sub-millisecond ttl", "k", 500 * time.Microsecond},
			{"ttl leaves no validity", "k", 2 * time.Millisecond},
		} {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				if err := call(tc.key, tc.ttl); !errors.Is(err, redlock.ErrInvalidArgument) {
					t.Fatalf("%v, want ErrInvalidArgument", err)
				}
			})
		}
	}
	if err := c.Do(ctx, "k", time.Second, nil); !errors.Is(err, redlock.ErrInvalidArgument) {
		t.Fatalf("Do with nil fn: %v", err)
	}
	l, err := c.TryLock(ctx, "k", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Extend(ctx, 0); !errors.Is(err, redlock.ErrInvalidArgument) {
		t.Fatalf("Extend(0): %v", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	// No I/O happened for the bad calls: nothing but the one good hold.
	if n := r.anyKey(t, "k"); n != 0 {
		t.Fatalf("key on %d nodes", n)
	}
}

func TestCancelledContextLeavesNoKey(t *testing.T) {
	r := newRig(t, 5)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// Nodes 0-2 see the caller cancel just as their script goes out, and
	// answer only after TryLock returned: the attempt cannot reach a quorum
	// before the cancel, and their late grants must still be released.
	unblock := make(chan struct{})
	for _, rc := range r.clients[:3] {
		rc.AddHook(beforeScript(func() { cancel(); <-unblock }))
	}
	c := r.client(t, redlock.WithNodeTimeout(300*time.Millisecond))
	_, err := c.TryLock(ctx, "k", 10*time.Second)
	close(unblock)
	if !errors.Is(err, redlock.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
		t.Fatalf("TryLock cancelled mid-attempt: %v, want ErrNotAcquired and context.Canceled", err)
	}
	// Already cancelled: no I/O, the ctx error joined.
	if _, err := c.TryLock(ctx, "k2", time.Second); !errors.Is(err, redlock.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
		t.Fatalf("TryLock with cancelled ctx: %v", err)
	}
	if _, err := c.Lock(ctx, "k2", time.Second); !errors.Is(err, redlock.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock with cancelled ctx: %v", err)
	}
	_ = c.Close() // the late grants release themselves in the background
	if n := r.anyKey(t, "k"); n != 0 {
		t.Fatalf("cancelled attempt left the key on %d nodes", n)
	}
}

// beforeScript is a go-redis hook that calls f before each EVAL/EVALSHA.
func beforeScript(f func()) redis.Hook { return scriptHook{before: f} }

// afterScript is a go-redis hook that calls f after each EVAL/EVALSHA reply.
func afterScript(f func()) redis.Hook { return scriptHook{after: f} }

type scriptHook struct{ before, after func() }

func (h scriptHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h scriptHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h scriptHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		script := cmd.Name() == "evalsha" || cmd.Name() == "eval"
		if script && h.before != nil {
			h.before()
		}
		err := next(ctx, cmd)
		if script && err == nil && h.after != nil { // not a NOSCRIPT, which an EVAL follows
			h.after()
		}
		return err
	}
}
