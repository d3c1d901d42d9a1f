package redlock

import (
	"context"
	"log/slog"
	"time"
)

// Observer receives lock events, for metrics. Calls are synchronous on the
// lock's path: keep them fast. An Observer must be safe for concurrent use.
// Embed [NopObserver] to implement only some of the methods.
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
