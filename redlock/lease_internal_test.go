package redlock

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/internal/redistest"
)

// leasesOpen is the number of leases the hold still keeps.
func (l *Lock) leasesOpen() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.leases)
}

// A lease is forgotten when it ends, however it ends (its CancelFunc, its
// parent, its deadline), so that a long hold does not keep every lease it
// gave; and the hold's end forgets the rest.
func TestLeasesAreForgotten(t *testing.T) {
	var nodes []redis.UniversalClient
	for _, p := range redistest.StartN(t, 3) {
		n := redis.NewClient(&redis.Options{Addr: p.Addr()})
		t.Cleanup(func() { _ = n.Close() })
		nodes = append(nodes, n)
	}
	c, err := New(nodes, WithNodeTimeout(max(100*redistest.PingRTT(t, nodes), 50*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	l, err := c.TryLock(t.Context(), "lease-forgotten", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	const n = 50
	// forgottenBy waits for the asynchronous forgetting (context.AfterFunc
	// runs it in a goroutine of its own), bounded.
	forgottenBy := func(t *testing.T, want int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for l.leasesOpen() != want {
			if time.Now().After(deadline) {
				t.Fatalf("%d leases kept, want %d", l.leasesOpen(), want)
			}
			time.Sleep(time.Millisecond)
		}
	}
	t.Run("CancelFunc", func(t *testing.T) {
		for range n {
			_, cancel := l.Lease(t.Context(), 0)
			cancel()
		}
		if got := l.leasesOpen(); got != 0 { // at once: the CancelFunc forgets it itself
			t.Fatalf("%d leases kept after their CancelFunc", got)
		}
	})
	t.Run("parent cancelled", func(t *testing.T) {
		parent, cancelParent := context.WithCancel(t.Context())
		for range n {
			_, cancel := l.Lease(parent, 0)
			defer cancel()
		}
		if got := l.leasesOpen(); got != n {
			t.Fatalf("%d leases kept, want %d", got, n)
		}
		cancelParent()
		forgottenBy(t, 0)
	})
	t.Run("deadline passed", func(t *testing.T) {
		for range n {
			_, cancel := l.Lease(t.Context(), l.TTL()) // already expired
			defer cancel()
		}
		forgottenBy(t, 0)
	})
	t.Run("no goroutine while open", func(t *testing.T) {
		const many = 1000
		before := runtime.NumGoroutine()
		for range many {
			_, cancel := l.Lease(t.Context(), 0)
			defer cancel()
		}
		// The Client's own goroutines come and go meanwhile; one per
		// lease would be a thousand more.
		if grew := runtime.NumGoroutine() - before; grew >= many/2 {
			t.Fatalf("%d more goroutines with %d leases open", grew, many)
		}
	})
	t.Run("hold ended", func(t *testing.T) {
		var leases []context.Context
		for range n {
			ctx, cancel := l.Lease(t.Context(), 0)
			defer cancel()
			leases = append(leases, ctx)
		}
		if err := l.Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := l.leasesOpen(); got != 0 {
			t.Fatalf("%d leases kept after Unlock", got)
		}
		for _, ctx := range leases {
			if ctx.Err() == nil {
				t.Fatal("a lease outlived Unlock")
			}
		}
	})
}
