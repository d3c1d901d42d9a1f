package redlock

import (
	"log/slog"
	"time"

	"github.com/fencedlock/fencedlock/clock"
)

// Option configures a Client. Each documents its default; zero means default.
// New rejects a nil Option with [ErrInvalidArgument].
type Option func(*config)

type config struct {
	clock       clock.Clock
	drift       float64
	nodeTimeout time.Duration
	retry       RetryStrategy
	logger      *slog.Logger
	observer    Observer
	hooks       hooks // the optional interfaces observer implements (observe.go), set by New
	replicaAcks int   // see WithReplicaAcks
	reacquire   bool  // see WithReacquireOnExtend
}

func defaultConfig() config {
	return config{
		clock:    clock.Real(),
		drift:    0.01,
		retry:    ExponentialBackoff(0, 0),
		logger:   slog.New(discardHandler{}),
		observer: NopObserver{},
	}
}

// WithClock sets the clock that governs validity, backoff, the watchdog and
// the retries of owed releases (a fake clock that never moves never fires
// them). Default: clock.Real(). Network deadlines, and the probe of a node
// marked down, are real time regardless.
func WithClock(c clock.Clock) Option {
	return func(cfg *config) {
		if c != nil {
			cfg.clock = c
		}
	}
}

// WithDriftFactor sets the share of the TTL that validity gives up for
// clock drift between client and nodes: the allowance is ttl·f + 2ms.
// Default 0.01. f must be in [0, 1), 0 meaning the default: New returns
// [ErrInvalidArgument] for NaN, infinities, negative factors and factors of
// 1 or more (which leave no validity for any TTL). A factor close to 1
// leaves validity only to long TTLs: TryLock refuses a ttl that it leaves
// none.
func WithDriftFactor(f float64) Option {
	return func(cfg *config) {
		if f != 0 {
			cfg.drift = f
		}
	}
}

// WithNodeTimeout bounds each call to one node. Default (0): a twentieth of
// the TTL of the call, between 5ms and 500ms, so a dead node costs a small
// fraction of the TTL and never the whole of it. Any d > 0 is used as
// given, for every TTL; a negative d makes New return [ErrInvalidArgument].
func WithNodeTimeout(d time.Duration) Option {
	return func(cfg *config) {
		if d != 0 {
			cfg.nodeTimeout = d
		}
	}
}

// WithRetry sets the retry strategy of Lock and Do. Default:
// ExponentialBackoff(16ms, 512ms), woken early by releases.
func WithRetry(s RetryStrategy) Option {
	return func(cfg *config) {
		if s != nil {
			cfg.retry = s
		}
	}
}

// WithLogger sets the logger for node errors and lost locks (at Debug and
// Warn), and for a node marked down (Warn) and up again (Info), each logged
// once per transition. Default: discard.
func WithLogger(l *slog.Logger) Option {
	return func(cfg *config) {
		if l != nil {
			cfg.logger = l
		}
	}
}

// WithObserver sets hooks for metrics. Default: [NopObserver].
func WithObserver(o Observer) Option {
	return func(cfg *config) {
		if o != nil {
			cfg.observer = o
		}
	}
}

// WithReacquireOnExtend lets Extend (and the watchdog of [AutoExtend])
// re-create the hold's key on a node that lost it — restarted without its
// data, or the key expired there — with SET NX, lifting that node's fence
// counter to the hold's token in the same script, and only while the
// hold's validity lasts: an Extend whose Until has passed sends nothing and
// returns [ErrLockLost], and so does one that decides only after it (a key
// re-created after the validity ran out does not revive the hold). A node counts toward the extension's quorum only
// where the key held this hold's value or the re-create succeeded; a node
// where another value holds the key refuses, as without the option. The
// waiting set is not consulted: the hold was granted by a quorum already.
//
// It is for nodes without persistence that are restarted one at a time
// (a rolling upgrade): without it, each restart takes the hold's key from
// one node for good, and a long hold is lost once a quorum of its nodes has
// restarted; with it, every extension puts the key back. The safety
// argument, and what it assumes of the restarts (one node at a time, each
// after the holds re-created their keys on the one before), is in
// docs/protocol.md (section 2, "Extensions that re-create"); the fast path
// costs nothing more, still one round trip per extension.
//
// Once an Extend with the option was sent, Unlock goes to every node, not
// only those that granted the hold: any of them may hold a re-created key.
// [Lock.Reacquired] lists the re-creates of a hold. Default: off — a
// vanished key is never re-created, and an Extend that finds its key gone
// on a quorum returns [ErrLockLost].
func WithReacquireOnExtend() Option { return func(cfg *config) { cfg.reacquire = true } }

// LockOption configures one TryLock, Lock or Do call, which rejects a nil
// LockOption with [ErrInvalidArgument].
type LockOption func(*lockConfig)

type lockConfig struct {
	autoExtend bool
	retry      RetryStrategy
	since      time.Time // when the call began (real time): older waiters win split votes
	trace      OpTrace   // the call's trace, if traced (observe.go)
}

// AutoExtend has the Client's watchdog extend the hold about every third of
// its TTL until Unlock. The watchdog gives a hold up only when a quorum of
// nodes answers that it is gone (Done closes at once) or when its validity
// runs out (Done closes at Until): an extension that failed on node errors
// or timeouts is tried again, halfway through the validity left beyond two
// node timeouts, for as long as that leaves room for a try. All the holds
// of a Client share one watchdog: a hold costs no goroutine. Off by default
// for TryLock and Lock; Do always auto-extends.
func AutoExtend() LockOption { return func(c *lockConfig) { c.autoExtend = true } }

// WithLockRetry overrides the client's retry strategy for one Lock or Do call.
func WithLockRetry(s RetryStrategy) LockOption {
	return func(c *lockConfig) {
		if s != nil {
			c.retry = s
		}
	}
}

// The default node timeout's bounds.
const (
	minNodeTimeout = 5 * time.Millisecond
	maxNodeTimeout = 500 * time.Millisecond
)

// nodeTimeout is the per-node deadline for a call with the given ttl.
func (c *Client) nodeTimeout(ttl time.Duration) time.Duration {
	if c.cfg.nodeTimeout > 0 {
		return c.cfg.nodeTimeout
	}
	return min(max(ttl/20, minNodeTimeout), maxNodeTimeout)
}

// driftFloor is the part of the drift allowance that does not scale with
// the ttl: Redis counts expiry in whole milliseconds, and the ttl sent to
// the nodes is truncated to them (the Redlock reference adds the same 2ms).
const driftFloor = 2 * time.Millisecond

// driftOf is the part of the ttl that validity gives up for clock drift.
// For ttl in [0, MaxInt64] and a factor in [0, 1) (see check), the product
// stays below 2^63 (float64(MaxInt64) is 2^63, times at most 1-2^-53), so
// it converts exactly; adding the floor saturates.
func (c *Client) driftOf(ttl time.Duration) time.Duration {
	return addSat(time.Duration(float64(ttl)*c.cfg.drift), driftFloor)
}

// check rejects option values out of their documented range (see
// WithDriftFactor, WithNodeTimeout), before any I/O.
func (cfg *config) check() error {
	switch {
	case !(cfg.drift >= 0 && cfg.drift < 1): // NaN and ±Inf included
		return invalid("drift factor %v is outside [0, 1)", cfg.drift)
	case cfg.nodeTimeout < 0:
		return invalid("node timeout %v is negative", cfg.nodeTimeout)
	case cfg.replicaAcks < 0:
		return invalid("replica acknowledgements %d is negative", cfg.replicaAcks)
	}
	return nil
}

// checkOptions rejects nil Options.
func checkOptions(opts []Option) error {
	for i, o := range opts {
		if o == nil {
			return invalid("option %d is nil", i)
		}
	}
	return nil
}

// checkLockOptions rejects nil LockOptions.
func checkLockOptions(opts []LockOption) error {
	for i, o := range opts {
		if o == nil {
			return invalid("lock option %d is nil", i)
		}
	}
	return nil
}
