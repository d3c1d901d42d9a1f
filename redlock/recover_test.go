package redlock_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/internal/redistest"
	"github.com/fencedlock/fencedlock/redlock"
)

// A redis client that panics (as go-redis's Ring did on Subscribe with no
// channel) must not crash the process from a goroutine the library
// started: the panic is logged, counted as a node error, and the waiter
// falls back to its backoff.
func TestPanickingNodeClientIsContained(t *testing.T) {
	node := panickySubscribe{redistest.Client(t, redistest.Start(t))}
	logs := &recorder{}
	errs := &nodeErrors{}
	newClient := func(backoff time.Duration) *redlock.Client {
		c, err := redlock.New([]redis.UniversalClient{node}, redlock.WithRetry(fixedBackoff(backoff)),
			redlock.WithLogger(slog.New(logs)), redlock.WithObserver(errs))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	holder := newClient(time.Minute)
	// The waiter can only rely on its backoff: make it short.
	waiter := newClient(10 * time.Millisecond)
	ctx := t.Context()
	l, err := holder.TryLock(ctx, "k", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		wl, err := waiter.Lock(ctx, "k", time.Minute)
		if err == nil {
			err = wl.Unlock(ctx)
		}
		got <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !errs.has("panic") {
		if time.Now().After(deadline) {
			t.Fatal("no node error for the subscriber's panic")
		}
		time.Sleep(time.Millisecond) // polling for the waiter to reach its subscribe
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter after a contained panic: %v", err)
	}
	if !logs.has(slog.LevelError, "panic") {
		t.Fatal("the panic was not logged at Error")
	}
}

// panickySubscribe is a node client whose Subscribe panics.
type panickySubscribe struct{ *redis.Client }

func (panickySubscribe) Subscribe(context.Context, ...string) *redis.PubSub {
	panic("subscribe exploded")
}

// nodeErrors is an Observer that keeps the node errors.
type nodeErrors struct {
	redlock.NopObserver
	mu   sync.Mutex // protects errs
	errs []*redlock.NodeError
}

func (o *nodeErrors) NodeError(err *redlock.NodeError) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.errs = append(o.errs, err)
}

func (o *nodeErrors) has(substr string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, e := range o.errs {
		if strings.Contains(e.Error(), substr) {
			return true
		}
	}
	return false
}
