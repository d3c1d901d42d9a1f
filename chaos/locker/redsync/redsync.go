// Package redsync adapts go-redsync/redsync (v4, with its go-redis v9
// pool) to locker.Locker: Redlock on every node, as redsync's users run
// it (its default retry delays, drift and per-node timeout factors). It
// has no fencing token, and no lost signal: a holder learns that the lock
// is gone only when Extend or Unlock fails. It uses the real clock, as
// redsync does.
package redsync

import (
	"context"
	"fmt"
	"math"
	"time"

	rs "github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"

	"github.com/fencedlock/fencedlock/chaos/locker"
)

// Locker is a redsync.Redsync on the nodes.
type Locker struct{ rs *rs.Redsync }

// New returns a Locker on cfg's nodes (cfg.Clock and NodeTimeout are not
// used: redsync reads the real clock, and bounds each node call by a
// factor of the TTL).
func New(cfg locker.Config) (*Locker, error) {
	if len(cfg.Nodes) == 0 {
		return nil, fmt.Errorf("redsync adapter: no nodes")
	}
	pools := make([]redis.Pool, len(cfg.Nodes))
	for i, n := range cfg.Nodes {
		pools[i] = goredis.NewPool(n)
	}
	return &Locker{rs: rs.New(pools...)}, nil
}

// Lock retries until ctx ends (redsync's LockContext with unbounded tries:
// ctx bounds them).
func (l *Locker) Lock(ctx context.Context, key string, ttl time.Duration) (locker.Hold, error) {
	return l.lock(ctx, key, ttl, math.MaxInt32)
}

// TryLock makes one attempt.
func (l *Locker) TryLock(ctx context.Context, key string, ttl time.Duration) (locker.Hold, error) {
	return l.lock(ctx, key, ttl, 1)
}

func (l *Locker) lock(ctx context.Context, key string, ttl time.Duration, tries int) (locker.Hold, error) {
	m := l.rs.NewMutex(key, rs.WithExpiry(ttl), rs.WithTries(tries))
	if err := m.LockContext(ctx); err != nil {
		return nil, fmt.Errorf("%w: %w", locker.ErrNotAcquired, err)
	}
	return &hold{rs: l.rs, key: key, m: m}, nil
}

// Close does nothing: redsync starts nothing in the background.
func (l *Locker) Close() error { return nil }

type hold struct {
	rs  *rs.Redsync
	key string
	m   *rs.Mutex // the latest mutex of the hold: Extend to another TTL makes a new one with the value
}

func (h *hold) Value() string         { return h.m.Value() }
func (h *hold) Token() (uint64, bool) { return 0, false }
func (h *hold) Until() time.Time      { return h.m.Until() }
func (h *hold) Done() <-chan struct{} { return nil }

// Extend sets the TTL to ttl on a quorum: redsync extends by the mutex's
// own expiry, so a mutex with ttl and this hold's value does it.
func (h *hold) Extend(ctx context.Context, ttl time.Duration) error {
	m := h.rs.NewMutex(h.key, rs.WithExpiry(ttl), rs.WithValue(h.m.Value()))
	ok, err := m.ExtendContext(ctx)
	if !ok {
		return fmt.Errorf("%w: %v", locker.ErrLost, err)
	}
	h.m = m
	return nil
}

// Release unlocks; fewer than a quorum still holding it is ErrLost.
func (h *hold) Release(ctx context.Context) error {
	ok, err := h.m.UnlockContext(ctx)
	if !ok {
		return fmt.Errorf("%w: %v", locker.ErrLost, err)
	}
	return nil
}
