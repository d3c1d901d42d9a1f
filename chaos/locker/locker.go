// Package locker is the chaos workload's view of a lock: what any lock
// gives its holder, so that the same workload, under the same fault
// schedule, can run fencedlock and the locks people compare it with.
//
// A Locker acquires a key, blocking until ctx ends (Lock) or once
// (TryLock), and returns a Hold: a lock value, an optional fencing token,
// the end of its validity as the lock computed it, and Extend, Release and
// a lost signal (Done, nil when the lock cannot tell). The adapters live in
// packages of their own below this one (fenced, redsync, redislock,
// sentinel), so that only the chaos harness and the CLI import the other
// libraries; a program built on package redlock never does.
package locker

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/clock"
)

// Locker is a lock client, one per workload client.
type Locker interface {
	// Lock acquires key for ttl, retrying until it gets it or ctx ends.
	Lock(ctx context.Context, key string, ttl time.Duration) (Hold, error)
	// TryLock makes one attempt.
	TryLock(ctx context.Context, key string, ttl time.Duration) (Hold, error)
	// Close stops what the Locker started; it does not close the redis
	// clients it was given.
	Close() error
}

// Hold is one acquisition.
type Hold interface {
	// Value is the lock value the hold put on its nodes.
	Value() string
	// Token is the fencing token, and false when the lock gives none (or
	// none that is ordered: a random one is not a fencing token).
	Token() (uint64, bool)
	// Until is the end of the validity, on the clock the Locker was given:
	// as the lock computes it, or the acquire's start plus the TTL when the
	// lock computes none.
	Until() time.Time
	// Extend sets the hold's TTL to ttl; an error wrapping ErrLost means
	// the hold is gone.
	Extend(ctx context.Context, ttl time.Duration) error
	// Release gives the hold up; an error wrapping ErrLost means it was
	// gone already.
	Release(ctx context.Context) error
	// Done is closed when the lock knows the hold is over; nil when the
	// lock cannot tell.
	Done() <-chan struct{}
}

// AutoExtender is a Locker that can keep a hold extended by itself until
// it is released, closing Done the moment an extension fails.
type AutoExtender interface {
	LockAutoExtend(ctx context.Context, key string, ttl time.Duration) (Hold, error)
}

// Granted is a Hold that knows which nodes (indexes of the Locker's nodes)
// its grant rests on.
type Granted interface {
	Nodes() []int
}

// Reacquirer is a Hold whose extensions may re-create its key on nodes
// that lost it (fencedlock with redlock.WithReacquireOnExtend): Reacquired
// lists the nodes (indexes of the Locker's nodes) where they did, one entry
// per re-create, in the order they were seen. The list only grows, and a
// re-create may be added after the Extend that sent it returned.
type Reacquirer interface {
	Reacquired() []int
}

// The errors adapters wrap.
var (
	// ErrNotAcquired: another holder has the key (or ctx ended first).
	ErrNotAcquired = errors.New("locker: not acquired")
	// ErrLost: Extend or Release found the hold gone.
	ErrLost = errors.New("locker: lock lost")
)

// Config is what an adapter is built from: the workload client's
// connections to the lock nodes (with the harness's hooks on them), in the
// backend's node order, and its clock.
type Config struct {
	Nodes       []*redis.Client
	Clock       clock.Clock   // the client's clock (skewed for client-clock-skew); nil means clock.Real()
	NodeTimeout time.Duration // bound of each node call, where the lock takes one
}

// Clk returns cfg.Clock, or the real clock when it is nil.
func (cfg Config) Clk() clock.Clock {
	if cfg.Clock == nil {
		return clock.Real()
	}
	return cfg.Clock
}
