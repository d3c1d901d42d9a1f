// Package contender puts each lock library under test behind one small
// interface, so that the benchmarks drive fencedlock, redsync, redislock and
// the raw protocol floor with the same loop on the same Redis nodes.
//
// A Locker is safe for concurrent use; a Session is not: each benchmark
// goroutine opens its own, for one key, and reuses it for every acquisition,
// so the harness itself allocates nothing per operation.
package contender

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Library names.
const (
	Fencedlock      = "fencedlock"
	FencedlockAcks  = "fencedlock-acks"
	Redsync         = "redsync"
	RedsyncFailFast = "redsync-failfast"
	Redislock       = "redislock"
	Raw             = "raw"
)

// Names lists every library New knows, in report order.
func Names() []string {
	return []string{Fencedlock, FencedlockAcks, Redsync, RedsyncFailFast, Redislock, Raw}
}

// ErrNoWait is returned by Session.Lock of a library that has no blocking
// acquire (the raw floor: any retry loop would be library logic).
var ErrNoWait = errors.New("contender: no blocking acquire")

// Config is what every library gets alike.
type Config struct {
	// TTL of every hold. Default 10s.
	TTL time.Duration
	// NodeTimeout bounds one acquire attempt on one node, for the libraries
	// that have such a setting: fencedlock (WithNodeTimeout) and redsync
	// (WithTimeoutFactor = NodeTimeout/TTL, a deadline on the whole attempt,
	// which its goroutine-per-node fan-out turns into a per-node one).
	// Zero: each library's default, which for both is TTL/20 (fencedlock
	// clamps it to 5ms..500ms).
	NodeTimeout time.Duration
	// CallTimeout, when > 0, is a deadline the harness puts on the calls a
	// library leaves unbounded: redsync's Unlock and each call of the raw
	// floor. Zero: none (a healthy run does not need one, and it would charge
	// those two a context and a timer per call that the others do not pay).
	CallTimeout time.Duration
	// RetryDelay is redislock's LinearBackoff for its blocking Obtain.
	// Default 10ms.
	RetryDelay time.Duration
	// RedsyncTries is redsync's WithTries for its blocking Lock. Default
	// 10000, so that it waits rather than gives up.
	RedsyncTries int
}

// Defaults returns c with every zero field set to its default.
func (c Config) Defaults() Config {
	if c.TTL <= 0 {
		c.TTL = 10 * time.Second
	}
	if c.RetryDelay <= 0 {
		c.RetryDelay = 10 * time.Millisecond
	}
	if c.RedsyncTries <= 0 {
		c.RedsyncTries = 10000
	}
	return c
}

// Locker is one library configured on a set of nodes.
type Locker interface {
	Name() string
	// Session opens a per-goroutine handle on key.
	Session(key string) Session
	// Counts returns the round trips and commands sent so far.
	Counts() Counts
	// Close releases the library's resources and closes its redis clients.
	Close() error
}

// Session acquires and releases one key. It is not safe for concurrent use.
type Session interface {
	// TryLock makes one acquire attempt.
	TryLock(ctx context.Context) error
	// Lock blocks until acquired or ctx ends, with the library's own waiting
	// strategy (ErrNoWait when it has none).
	Lock(ctx context.Context) error
	// Unlock releases the hold taken by the last successful TryLock or Lock.
	Unlock(ctx context.Context) error
}

// New returns library name on the nodes at addrs, with its own go-redis
// clients (one per node; redislock uses only the first node). The nodes of
// fencedlock-acks must each have a replica attached: without one, every
// acquire fails.
func New(name string, addrs []string, cfg Config) (Locker, error) {
	if len(addrs) == 0 {
		return nil, errors.New("contender: no nodes")
	}
	cfg = cfg.Defaults()
	ctr := new(counter)
	clients := newClients(addrs, ctr)
	var (
		l   library
		err error
	)
	switch name {
	case Fencedlock:
		l, err = newFencedlock(Fencedlock, clients, cfg, 0)
	case FencedlockAcks:
		l, err = newFencedlock(FencedlockAcks, clients, cfg, replicaAcks)
	case Redsync:
		l = newRedsync(Redsync, clients, cfg, false)
	case RedsyncFailFast:
		l = newRedsync(RedsyncFailFast, clients, cfg, true)
	case Redislock:
		for _, c := range clients[1:] {
			_ = c.Close()
		}
		l = newRedislock(clients[0], cfg)
	case Raw:
		l = newRaw(clients, cfg)
	default:
		err = fmt.Errorf("contender: unknown library %q (known: %v)", name, Names())
	}
	if err != nil {
		_ = closeAll(clients)
		return nil, err
	}
	return counted{l, ctr}, nil
}

// library is a Locker without the counting, which New adds.
type library interface {
	Name() string
	Session(key string) Session
	Close() error
}

type counted struct {
	library
	ctr *counter
}

func (c counted) Counts() Counts { return c.ctr.snapshot() }

// newClients returns one go-redis client per address, the same options for
// every library: go-redis defaults, plus ContextTimeoutEnabled so that a
// context deadline actually bounds a call — without it go-redis waits its
// 5s ReadTimeout on a paused node whatever the caller's deadline, and
// neither fencedlock's nor redsync's per-node timeout would mean anything.
func newClients(addrs []string, ctr *counter) []*redis.Client {
	cs := make([]*redis.Client, len(addrs))
	for i, a := range addrs {
		cs[i] = redis.NewClient(&redis.Options{Addr: a, ContextTimeoutEnabled: true})
		cs[i].AddHook(ctr)
	}
	return cs
}

func closeAll(cs []*redis.Client) error {
	var errs []error
	for _, c := range cs {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// withTimeout bounds ctx by d when d > 0.
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, d)
}
