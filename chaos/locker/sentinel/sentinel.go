// Package sentinel is the lock most services run: one Redis primary (with
// an asynchronous replica that Sentinel promotes when the primary fails),
// SET key value NX PX ttl to acquire, an INCR'd counter beside the key as
// its fencing token, a compare-and-delete to release and a
// compare-and-pexpire to extend (Lua, so that neither touches a key that
// another holder made since). It runs on the first node, which must be a
// primary with a replica for the comparison to mean what it says: a
// failover may promote a replica that has neither the newest lock key nor
// the newest counter value.
package sentinel

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/chaos/locker"
	"github.com/fencedlock/fencedlock/clock"
)

// acquire sets the key if it is free and returns the counter's next value
// (0 when the key is taken). The counter is a Lua number: exact below
// 2^53, more increments than any run makes.
var acquire = redis.NewScript(`
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return 0`)

// release deletes the key only while it holds the hold's value.
var release = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`)

// extend sets the key's TTL only while it holds the hold's value.
var extend = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0`)

// CounterKey is the key of key's fence counter, in key's hash slot.
func CounterKey(key string) string { return "{" + key + "}:fence" }

// Locker is the lock on one node.
type Locker struct {
	rdb *redis.Client
	clk clock.Clock
}

// New returns a Locker on cfg.Nodes[0].
func New(cfg locker.Config) (*Locker, error) {
	if len(cfg.Nodes) == 0 {
		return nil, fmt.Errorf("sentinel adapter: no nodes")
	}
	return &Locker{rdb: cfg.Nodes[0], clk: cfg.Clk()}, nil
}

// Lock tries until it gets the key or ctx ends, waiting a random part of
// a tenth of the TTL between tries (a free key is taken within that, on
// average, without a herd of tries on every release).
func (l *Locker) Lock(ctx context.Context, key string, ttl time.Duration) (locker.Hold, error) {
	for {
		h, err := l.TryLock(ctx, key, ttl)
		if err == nil {
			return h, nil
		}
		if err := l.clk.Sleep(ctx, mrand.N(ttl/10)+1); err != nil {
			return nil, fmt.Errorf("%w: %w", locker.ErrNotAcquired, errors.Join(err, ctx.Err()))
		}
	}
}

// TryLock makes one attempt. The validity is the TTL from before the SET
// was sent: the key cannot outlive that on the node (whose clock is
// trusted).
func (l *Locker) TryLock(ctx context.Context, key string, ttl time.Duration) (locker.Hold, error) {
	if key == "" || ttl < time.Millisecond {
		return nil, fmt.Errorf("sentinel lock: bad key %q or ttl %v", key, ttl)
	}
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	value := hex.EncodeToString(b[:])
	start := l.clk.Now()
	n, err := acquire.Run(ctx, l.rdb, []string{key, CounterKey(key)}, value, ttl.Milliseconds()).Int64()
	switch {
	case err != nil:
		// The SET may have landed: take it back, so that it does not block
		// the key for a TTL.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ttl)
		_ = release.Run(rctx, l.rdb, []string{key}, value).Err()
		cancel()
		return nil, fmt.Errorf("%w: %w", locker.ErrNotAcquired, err)
	case n == 0:
		return nil, fmt.Errorf("%w: %s is taken", locker.ErrNotAcquired, key)
	}
	return &hold{l: l, key: key, value: value, token: uint64(n), until: start.Add(ttl)}, nil
}

// Close does nothing: the lock starts nothing in the background.
func (l *Locker) Close() error { return nil }

type hold struct {
	l     *Locker
	key   string
	value string
	token uint64
	until time.Time
}

func (h *hold) Value() string         { return h.value }
func (h *hold) Token() (uint64, bool) { return h.token, true }
func (h *hold) Until() time.Time      { return h.until }
func (h *hold) Done() <-chan struct{} { return nil }
func (h *hold) Nodes() []int          { return []int{0} }

func (h *hold) Extend(ctx context.Context, ttl time.Duration) error {
	start := h.l.clk.Now()
	n, err := extend.Run(ctx, h.l.rdb, []string{h.key}, h.value, ttl.Milliseconds()).Int64()
	switch {
	case err != nil:
		return err
	case n == 0:
		return fmt.Errorf("%w: %s no longer holds this hold's value", locker.ErrLost, h.key)
	}
	h.until = start.Add(ttl)
	return nil
}

func (h *hold) Release(ctx context.Context) error {
	n, err := release.Run(ctx, h.l.rdb, []string{h.key}, h.value).Int64()
	switch {
	case err != nil:
		return err
	case n == 0:
		return fmt.Errorf("%w: %s no longer holds this hold's value", locker.ErrLost, h.key)
	}
	return nil
}
