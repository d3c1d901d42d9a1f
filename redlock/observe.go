package redlock

import (
	"context"
	"errors"
	"time"
)

// An [Observer] may also implement any of the interfaces below; the Client
// finds them by type assertion once, in [New], and calls only those that
// are there: an Observer without them costs the lock nothing more. Like
// the Observer's own methods, they are called synchronously on the lock's
// path (keep them fast), must be safe for concurrent use, and a panic in
// one is recovered and logged.

// AcquireObserver hears how each acquisition call ended.
type AcquireObserver interface {
	// AcquireReturned: a TryLock or Lock call (Do's included) for key
	// returned after waited, measured on the Client's clock from the
	// call to its return. On success token is the hold's and err is nil;
	// otherwise token is 0 and err is what the call returned (it matches
	// [ErrNotAcquired], joined with the nodes' [*NodeError]s or ctx.Err()).
	// Calls refused for bad input ([ErrInvalidArgument]) are not reported.
	AcquireReturned(key string, token uint64, err error, waited time.Duration)
}

// HoldObserver hears when each hold ends.
type HoldObserver interface {
	// HoldEnded: the hold of key with token ended after held (on the
	// Client's clock, from its acquisition): Unlock was called, it was
	// found gone, or, while Done was watched (or AutoExtend on), its
	// validity ran out or the Client was closed. Called exactly once per
	// hold, as Done closes.
	HoldEnded(key string, token uint64, held time.Duration)
}

// ReacquireObserver hears the re-creates of [WithReacquireOnExtend].
type ReacquireObserver interface {
	// Reacquired: an extension of the hold of key with token re-created
	// the key on node (its index in the nodes given to New), which had lost
	// it. A node restarted without data shows as one per hold it had.
	Reacquired(key string, token uint64, node int)
}

// RoundTripObserver hears how long nodes take to answer.
type RoundTripObserver interface {
	// NodeRoundTrip: a call to node (its index in the nodes given to New)
	// was answered d after it was queued; calls that got no reply (a
	// timeout, a broken connection) are [Observer.NodeError]s instead.
	// Called on the goroutines that read the replies.
	NodeRoundTrip(node int, d time.Duration)
}

// Op names an operation that a [Tracer] traces.
type Op uint8

const (
	OpAcquire Op = iota + 1 // a TryLock or Lock call, all its attempts
	OpExtend                // an Extend, the watchdog's included
	OpUnlock                // an Unlock
)

func (o Op) String() string {
	switch o {
	case OpAcquire:
		return "acquire"
	case OpExtend:
		return "extend"
	case OpUnlock:
		return "unlock"
	}
	return "Op(?)"
}

// Tracer traces each operation, for distributed tracing.
type Tracer interface {
	// StartOp: op on key begins, with the caller's ctx (the watchdog's
	// extensions get a background one); token is the hold's, 0 for an
	// acquire. The OpTrace it returns (nil for none) hears of the
	// operation's node calls and of its end.
	StartOp(ctx context.Context, op Op, key string, token uint64) OpTrace
}

// OpTrace is one traced operation (see [Tracer]).
type OpTrace interface {
	// Node: node answered one call of the operation d after the call
	// was queued; err is nil, the node's error, or a timeout (or the
	// node is marked down: the call was not sent). Called on any
	// goroutine, and possibly after End: an operation decides at a
	// quorum and its other calls finish in the background.
	Node(node int, d time.Duration, err error)
	// End: the operation returned err; token is the hold's (0 for an
	// acquire that failed). Called once.
	End(token uint64, err error)
}

// hooks are the optional interfaces the Observer implements.
type hooks struct {
	acquire, hold, trip, trace, reacquire bool
}

func hooksOf(o Observer) hooks {
	if m, ok := o.(multiObserver); ok {
		return m.hooks()
	}
	_, acquire := o.(AcquireObserver)
	_, hold := o.(HoldObserver)
	_, trip := o.(RoundTripObserver)
	_, trace := o.(Tracer)
	_, reacquire := o.(ReacquireObserver)
	return hooks{acquire: acquire, hold: hold, trip: trip, trace: trace, reacquire: reacquire}
}

func (s safeObserver) AcquireReturned(key string, token uint64, err error, waited time.Duration) {
	s.call("AcquireReturned", func() { s.o.(AcquireObserver).AcquireReturned(key, token, err, waited) })
}

func (s safeObserver) HoldEnded(key string, token uint64, held time.Duration) {
	s.call("HoldEnded", func() { s.o.(HoldObserver).HoldEnded(key, token, held) })
}

func (s safeObserver) Reacquired(key string, token uint64, node int) {
	s.call("Reacquired", func() { s.o.(ReacquireObserver).Reacquired(key, token, node) })
}

func (s safeObserver) NodeRoundTrip(node int, d time.Duration) {
	s.call("NodeRoundTrip", func() { s.o.(RoundTripObserver).NodeRoundTrip(node, d) })
}

func (s safeObserver) startOp(ctx context.Context, op Op, key string, token uint64) OpTrace {
	var t OpTrace
	s.call("StartOp", func() { t = s.o.(Tracer).StartOp(ctx, op, key, token) })
	if t == nil {
		return nil
	}
	return safeTrace{t: t, s: s}
}

// safeTrace calls an OpTrace so that a panic in it goes no further.
type safeTrace struct {
	t OpTrace
	s safeObserver
}

func (st safeTrace) Node(node int, d time.Duration, err error) {
	st.s.call("OpTrace.Node", func() { st.t.Node(node, d, err) })
}
func (st safeTrace) End(token uint64, err error) {
	st.s.call("OpTrace.End", func() { st.t.End(token, err) })
}

// startOp starts tracing op, when the Observer is a Tracer; nil otherwise.
func (c *Client) startOp(ctx context.Context, op Op, key string, token uint64) OpTrace {
	if !c.cfg.hooks.trace {
		return nil
	}
	return c.cfg.observer.(safeObserver).startOp(ctx, op, key, token)
}

// endOp ends a trace that startOp started, if any.
func endOp(t OpTrace, token uint64, err error) {
	if t != nil {
		t.End(token, err)
	}
}

// acquireReturned reports an acquisition call's outcome to an
// AcquireObserver; bad input is not an outcome.
func (c *Client) acquireReturned(key string, token uint64, err error, since time.Time) {
	if !c.cfg.hooks.acquire || errors.Is(err, ErrInvalidArgument) {
		return
	}
	c.cfg.observer.(safeObserver).AcquireReturned(key, token, err, c.cfg.clock.Since(since))
}

// answered reports node's answer to a call of g: its round trip, and to
// g's operation trace. A call without a reply is not a round trip.
func (g *group) answered(o *op, err error) {
	if !g.c.cfg.hooks.trip && g.trace == nil {
		return
	}
	d := time.Since(g.queued)
	if g.c.cfg.hooks.trip && isReply(err) {
		g.c.cfg.observer.(safeObserver).NodeRoundTrip(o.node, d)
	}
	if g.trace != nil {
		g.trace.Node(o.node, d, err)
	}
}
