// Package redislock adapts bsm/redislock to locker.Locker: a single-node
// lock (SET NX with a TTL, released and refreshed by scripts that compare
// the value) on the first node only, as its users run it against one
// Redis. Its Lock.Token() is a random string, not an ordered number, so the
// Hold has no fencing token; nor a lost signal.
package redislock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/bsm/redislock"

	"github.com/fencedlock/fencedlock/chaos/locker"
	"github.com/fencedlock/fencedlock/clock"
)

// Locker is a redislock.Client on the first node.
type Locker struct {
	c   *redislock.Client
	clk clock.Clock
}

// New returns a Locker on cfg.Nodes[0].
func New(cfg locker.Config) (*Locker, error) {
	if len(cfg.Nodes) == 0 {
		return nil, fmt.Errorf("redislock adapter: no nodes")
	}
	return &Locker{c: redislock.New(cfg.Nodes[0]), clk: cfg.Clk()}, nil
}

// Lock tries until it gets the key or ctx ends, waiting a random part of
// a tenth of the TTL between tries (redislock's own retry gives up on the
// first node error; this one goes on, as a caller that must get the lock
// does).
func (l *Locker) Lock(ctx context.Context, key string, ttl time.Duration) (locker.Hold, error) {
	for {
		h, err := l.TryLock(ctx, key, ttl)
		if err == nil {
			return h, nil
		}
		if err := l.clk.Sleep(ctx, rand.N(ttl/10)+1); err != nil {
			return nil, fmt.Errorf("%w: %w", locker.ErrNotAcquired, errors.Join(err, ctx.Err()))
		}
	}
}

// TryLock makes one attempt.
func (l *Locker) TryLock(ctx context.Context, key string, ttl time.Duration) (locker.Hold, error) {
	start := l.clk.Now()
	lk, err := l.c.Obtain(ctx, key, ttl, nil) // nil options: no retry
	if err != nil {
		return nil, fmt.Errorf("%w: %w", locker.ErrNotAcquired, err)
	}
	return &hold{lk: lk, clk: l.clk, until: start.Add(ttl)}, nil
}

// Close does nothing: redislock starts nothing in the background.
func (l *Locker) Close() error { return nil }

type hold struct {
	lk    *redislock.Lock
	clk   clock.Clock
	until time.Time // the call's start plus the TTL: redislock computes no validity
}

func (h *hold) Value() string         { return h.lk.Token() }
func (h *hold) Token() (uint64, bool) { return 0, false }
func (h *hold) Until() time.Time      { return h.until }
func (h *hold) Done() <-chan struct{} { return nil }
func (h *hold) Nodes() []int          { return []int{0} }

func (h *hold) Extend(ctx context.Context, ttl time.Duration) error {
	start := h.clk.Now()
	switch err := h.lk.Refresh(ctx, ttl, nil); {
	case errors.Is(err, redislock.ErrNotObtained):
		return fmt.Errorf("%w: %w", locker.ErrLost, err)
	case err != nil:
		return err
	}
	h.until = start.Add(ttl)
	return nil
}

func (h *hold) Release(ctx context.Context) error {
	err := h.lk.Release(ctx)
	if errors.Is(err, redislock.ErrLockNotHeld) {
		return fmt.Errorf("%w: %w", locker.ErrLost, err)
	}
	return err
}
