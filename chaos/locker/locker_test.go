package locker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/chaos/backend/process"
	"github.com/fencedlock/fencedlock/chaos/locker"
	"github.com/fencedlock/fencedlock/chaos/locker/fenced"
	"github.com/fencedlock/fencedlock/chaos/locker/redislock"
	"github.com/fencedlock/fencedlock/chaos/locker/redsync"
	"github.com/fencedlock/fencedlock/chaos/locker/sentinel"
	"github.com/fencedlock/fencedlock/internal/redisproc"
	"github.com/fencedlock/fencedlock/redlock"
)

// ttl is the adapters' lock TTL here: long enough that no hold of the test
// runs out on a loaded machine while the test looks at it.
const ttl = 5 * time.Second

// shortTTL is a TTL that runs out within the test: long enough for
// fencedlock's validity with the node timeout of the test (a tenth of it).
const shortTTL = time.Second

// takeOver acquires key with l once it is free, trying every tenth of
// shortTTL until the test's deadline.
func takeOver(t *testing.T, l locker.Locker, key string) locker.Hold {
	t.Helper()
	for {
		h, err := l.TryLock(t.Context(), key, ttl)
		if err == nil {
			return h
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("key %s never came free: %v", key, err)
		case <-time.After(shortTTL / 10):
		}
	}
}

// plainNodes starts n redis-server nodes and returns a client of each.
func plainNodes(t *testing.T, n int) []*redis.Client {
	t.Helper()
	procs, err := redisproc.StartN(t.Context(), n, redisproc.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var rdbs []*redis.Client
	for _, p := range procs {
		rdb := redis.NewClient(&redis.Options{Addr: p.Addr()})
		t.Cleanup(func() { _ = rdb.Close(); _ = p.Close() })
		rdbs = append(rdbs, rdb)
	}
	return rdbs
}

// replicaNode starts one node as a primary with a replica under Sentinel
// (the process backend's replica pair) and returns a client of it.
func replicaNode(t *testing.T) []*redis.Client {
	t.Helper()
	b, err := process.New(t.Context(), 1, process.WithReplicas(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: b.Nodes()[0].Addr()})
	t.Cleanup(func() {
		_ = rdb.Close()
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return []*redis.Client{rdb}
}

// Each adapter acquires, refuses a second holder, extends, releases, and
// says lost for a hold that is gone; a lock with a token gives the next
// holder a greater one.
func TestAdapters(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nodes func(*testing.T) []*redis.Client
		build func(locker.Config) (locker.Locker, error)
		token bool
	}{
		{"fencedlock", func(t *testing.T) []*redis.Client { return plainNodes(t, 5) },
			func(c locker.Config) (locker.Locker, error) { return fenced.New(c) }, true},
		{"fencedlock-acks", replicaNode,
			func(c locker.Config) (locker.Locker, error) { return fenced.New(c, redlock.WithReplicaAcks(1)) }, true},
		{"redsync", func(t *testing.T) []*redis.Client { return plainNodes(t, 5) },
			func(c locker.Config) (locker.Locker, error) { return redsync.New(c) }, false},
		{"redislock", func(t *testing.T) []*redis.Client { return plainNodes(t, 1) },
			func(c locker.Config) (locker.Locker, error) { return redislock.New(c) }, false},
		{"sentinel", replicaNode,
			func(c locker.Config) (locker.Locker, error) { return sentinel.New(c) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := locker.Config{Nodes: tc.nodes(t), NodeTimeout: 100 * time.Millisecond}
			a, err := tc.build(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			b, err := tc.build(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			ctx := t.Context()
			const key = "adapter:key"

			before := time.Now()
			h, err := a.Lock(ctx, key, ttl)
			if err != nil {
				t.Fatalf("Lock: %v", err)
			}
			tok, ok := h.Token()
			if ok != tc.token || ok && tok == 0 {
				t.Errorf("Token = %d, %v; want a token: %v", tok, ok, tc.token)
			}
			if u := h.Until(); u.Before(before) || u.After(time.Now().Add(ttl)) {
				t.Errorf("Until %v not within the TTL from the call", u)
			}
			if _, err := b.TryLock(ctx, key, ttl); !errors.Is(err, locker.ErrNotAcquired) {
				t.Fatalf("TryLock of a held key = %v, want ErrNotAcquired", err)
			}
			short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			_, err = b.Lock(short, key, ttl)
			cancel()
			if !errors.Is(err, locker.ErrNotAcquired) {
				t.Fatalf("Lock of a held key until ctx ends = %v, want ErrNotAcquired", err)
			}

			was := h.Until()
			if err := h.Extend(ctx, 2*ttl); err != nil {
				t.Fatalf("Extend: %v", err)
			}
			if !h.Until().After(was) {
				t.Errorf("Until %v after Extend to twice the TTL, was %v", h.Until(), was)
			}
			if err := h.Release(ctx); err != nil {
				t.Fatalf("Release: %v", err)
			}
			if err := h.Release(ctx); !errors.Is(err, locker.ErrLost) {
				t.Errorf("second Release = %v, want ErrLost", err)
			}
			if err := h.Extend(ctx, ttl); !errors.Is(err, locker.ErrLost) {
				t.Errorf("Extend after Release = %v, want ErrLost", err)
			}

			h2, err := b.TryLock(ctx, key, ttl)
			if err != nil {
				t.Fatalf("TryLock after Release: %v", err)
			}
			if tok2, _ := h2.Token(); tc.token && tok2 <= tok {
				t.Errorf("next holder's token %d, want above %d", tok2, tok)
			}
			if err := h2.Release(ctx); err != nil {
				t.Errorf("Release: %v", err)
			}

			// A hold that ran out, whose key another holder took, must not
			// release or extend that holder's key (compare-and-delete,
			// compare-and-pexpire).
			h3, err := a.TryLock(ctx, key, shortTTL)
			if err != nil {
				t.Fatalf("TryLock: %v", err)
			}
			h4 := takeOver(t, b, key)
			if err := h3.Extend(ctx, ttl); !errors.Is(err, locker.ErrLost) {
				t.Errorf("Extend of a hold taken over = %v, want ErrLost", err)
			}
			if err := h3.Release(ctx); !errors.Is(err, locker.ErrLost) {
				t.Errorf("Release of a hold taken over = %v, want ErrLost", err)
			}
			if _, err := a.TryLock(ctx, key, ttl); !errors.Is(err, locker.ErrNotAcquired) {
				t.Errorf("TryLock after the old holder's Release = %v, want ErrNotAcquired: the new hold must stay", err)
			}
			if err := h4.Release(ctx); err != nil {
				t.Errorf("Release of the new hold: %v", err)
			}
		})
	}
}
