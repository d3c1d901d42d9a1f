package redlock

import (
	"context"
	"log/slog"
	"runtime/debug"
	"time"
)

// Observer receives lock events, for metrics. Calls are synchronous on the
// lock's path: keep them fast, and do not call the lock's methods from them
// (an Unlock, an Extend or a TryLock): they may run while the hold's own
// calls are in progress, which those would wait for — start a goroutine for
// such work. An Observer must be safe for concurrent use.
// A panic in one is recovered and logged (at Error): it does not reach the
// lock's caller, nor leave the lock's bookkeeping half done.
// Embed [NopObserver] to implement only some of the methods. An Observer
// may also implement [AcquireObserver], [HoldObserver], [RoundTripObserver]
// and [Tracer]; [Observers] combines several. Packages redlockprom
// (Prometheus) and redlockotel (OpenTelemetry) are Observers.
type Observer interface {
	// Acquired: a hold began after latency (from the successful attempt's
	// start) with this token.
	Acquired(key string, token uint64, latency time.Duration)
	// Released: Unlock reached a quorum.
	Released(key string, token uint64)
	// Extended: an Extend reached a quorum.
	Extended(key string, token uint64)
	// Lost: the hold ended other than by Unlock (its validity ran out, an
	// Extend or the watchdog found it gone, Close, or Unlock found it gone).
	Lost(key string, token uint64)
	// NodeError: one node failed a call.
	NodeError(err *NodeError)
}

// NopObserver ignores every event.
type NopObserver struct{}

func (NopObserver) Acquired(string, uint64, time.Duration) {}
func (NopObserver) Released(string, uint64)                {}
func (NopObserver) Extended(string, uint64)                {}
func (NopObserver) Lost(string, uint64)                    {}
func (NopObserver) NodeError(*NodeError)                   {}

// discardHandler is a slog.Handler that drops everything (the default logger).
type discardHandler struct{}

func (discardHandler) Enabled(context.Context, slog.Level) bool  { return false }
func (discardHandler) Handle(context.Context, slog.Record) error { return nil }
func (d discardHandler) WithAttrs([]slog.Attr) slog.Handler      { return d }
func (d discardHandler) WithGroup(string) slog.Handler           { return d }

// safeObserver calls an Observer so that a panic in it is logged and goes
// no further: the calls are made in the middle of the lock's bookkeeping
// (a hand-off telling its waiter, Close ending every hold), which a panic
// would leave half done for holds that are not the Observer's fault.
type safeObserver struct {
	o      Observer
	logger *slog.Logger
}

func (s safeObserver) call(event string, f func()) {
	defer func() {
		if p := recover(); p != nil {
			s.logger.LogAttrs(context.Background(), slog.LevelError, "redlock: recovered a panic in an Observer",
				slog.String("event", event), slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
		}
	}()
	f()
}

func (s safeObserver) Acquired(key string, token uint64, latency time.Duration) {
	s.call("Acquired", func() { s.o.Acquired(key, token, latency) })
}
func (s safeObserver) Released(key string, token uint64) {
	s.call("Released", func() { s.o.Released(key, token) })
}
func (s safeObserver) Extended(key string, token uint64) {
	s.call("Extended", func() { s.o.Extended(key, token) })
}
func (s safeObserver) Lost(key string, token uint64) { s.call("Lost", func() { s.o.Lost(key, token) }) }
func (s safeObserver) NodeError(err *NodeError)      { s.call("NodeError", func() { s.o.NodeError(err) }) }
