// Package fenced adapts fencedlock's redlock.Client to locker.Locker: the
// quorum lock on every node, with its fencing token, its lost signal, its
// auto-extension and the re-creates of its extensions (locker.Reacquirer).
package fenced

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/chaos/locker"
	"github.com/fencedlock/fencedlock/redlock"
)

// Locker is a redlock.Client as a locker.Locker.
type Locker struct {
	rl *redlock.Client
}

// New returns a Locker on cfg's nodes; opts go to redlock.New after the
// clock and node timeout of cfg (WithReplicaAcks, for one).
func New(cfg locker.Config, opts ...redlock.Option) (*Locker, error) {
	nodes := make([]redis.UniversalClient, len(cfg.Nodes))
	for i, n := range cfg.Nodes {
		nodes[i] = n
	}
	all := append([]redlock.Option{redlock.WithClock(cfg.Clk()), redlock.WithNodeTimeout(cfg.NodeTimeout)}, opts...)
	rl, err := redlock.New(nodes, all...)
	if err != nil {
		return nil, err
	}
	return &Locker{rl: rl}, nil
}

// Lock calls redlock's Lock.
func (l *Locker) Lock(ctx context.Context, key string, ttl time.Duration) (locker.Hold, error) {
	return wrap(l.rl.Lock(ctx, key, ttl))
}

// TryLock calls redlock's TryLock.
func (l *Locker) TryLock(ctx context.Context, key string, ttl time.Duration) (locker.Hold, error) {
	return wrap(l.rl.TryLock(ctx, key, ttl))
}

// LockAutoExtend calls redlock's Lock with AutoExtend.
func (l *Locker) LockAutoExtend(ctx context.Context, key string, ttl time.Duration) (locker.Hold, error) {
	return wrap(l.rl.Lock(ctx, key, ttl, redlock.AutoExtend()))
}

// Close closes the redlock.Client.
func (l *Locker) Close() error { return l.rl.Close() }

func wrap(lk *redlock.Lock, err error) (locker.Hold, error) {
	if err != nil {
		if errors.Is(err, redlock.ErrNotAcquired) {
			return nil, fmt.Errorf("%w: %w", locker.ErrNotAcquired, err)
		}
		return nil, err
	}
	return Hold{lk}, nil
}

// Hold is a *redlock.Lock as a locker.Hold.
type Hold struct{ L *redlock.Lock }

// Value returns the lock's value.
func (h Hold) Value() string { return h.L.Value() }

// Token returns the fencing token: fencedlock always has one.
func (h Hold) Token() (uint64, bool) { return h.L.Token(), true }

// Until returns the lock's Until.
func (h Hold) Until() time.Time { return h.L.Until() }

// Done returns the lock's Done.
func (h Hold) Done() <-chan struct{} { return h.L.Done() }

// Nodes returns the nodes whose grants counted toward the token.
func (h Hold) Nodes() []int { return h.L.Nodes() }

// Reacquired returns the nodes where the lock's extensions re-created its
// key (redlock.WithReacquireOnExtend; always empty without it).
func (h Hold) Reacquired() []int { return h.L.Reacquired() }

// Extend calls the lock's Extend.
func (h Hold) Extend(ctx context.Context, ttl time.Duration) error { return lost(h.L.Extend(ctx, ttl)) }

// Release calls the lock's Unlock.
func (h Hold) Release(ctx context.Context) error { return lost(h.L.Unlock(ctx)) }

func lost(err error) error {
	if errors.Is(err, redlock.ErrLockLost) {
		return fmt.Errorf("%w: %w", locker.ErrLost, err)
	}
	return err
}
