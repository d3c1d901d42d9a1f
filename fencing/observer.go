package fencing

import "errors"

// GuardObserver hears each decision of a guard, for metrics. Its methods
// are called synchronously on the caller's goroutine, after the decision
// and before the guard's call returns: keep them fast. It must be safe for
// concurrent use. Calls that fail before a decision (bad input, an
// unreachable storage) are not reported.
type GuardObserver interface {
	// Admitted: token was admitted for resource.
	Admitted(resource string, token uint64)
	// Rejected: token was refused for resource, as stale: highest was
	// admitted before.
	Rejected(resource string, token, highest uint64)
}

// Option configures any guard of this package: [NewMemoryWith], [NewRedis],
// [NewSQL] and [Middleware] all take it.
type Option interface {
	MemoryOption
	RedisOption
	SQLOption
	MiddlewareOption
}

// WithObserver reports every admission and stale-token rejection to o.
// Default: none. Give it to a guard or to the Middleware in front of that
// guard, not both, or each decision is reported twice. [SQL.AdmitTx]
// reports at its upsert: a transaction rolled back after it still counts.
func WithObserver(o GuardObserver) Option { return observerOption{o} }

type observerOption struct{ o GuardObserver }

func (op observerOption) applyMemory(m *Memory)         { m.obs = op.o }
func (op observerOption) applyRedis(g *Redis)           { g.obs = op.o }
func (op observerOption) applySQL(g *SQL)               { g.obs = op.o }
func (op observerOption) applyMiddleware(m *middleware) { m.obs = op.o }

// observe reports err, the outcome of admitting token for resource, to o:
// nil is an admission, a *StaleTokenError a rejection, anything else no
// decision. It returns err.
func observe(o GuardObserver, resource string, token uint64, err error) error {
	if o == nil {
		return err
	}
	if err == nil {
		o.Admitted(resource, token)
		return nil
	}
	var stale *StaleTokenError
	if errors.As(err, &stale) {
		o.Rejected(resource, token, stale.Highest)
	}
	return err
}
