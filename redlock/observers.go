package redlock

import (
	"context"
	"log/slog"
	"time"
)

// Observers returns an Observer that passes every event to each of obs, in
// order: metrics and tracing side by side. Each optional interface (see
// [AcquireObserver]) reaches those of obs that implement it, and the
// Client calls it only if one of them does. Nil entries are skipped. A
// panic in one of obs is recovered and logged, and the others still get
// the event.
func Observers(obs ...Observer) Observer {
	m := multiObserver{parts: make([]Observer, 0, len(obs))}
	for _, o := range obs {
		if o != nil {
			m.parts = append(m.parts, o)
		}
	}
	return m
}

type multiObserver struct {
	parts  []Observer
	logger *slog.Logger // the Client's (withLogger), for the parts' panics
}

// withLogger returns m logging the parts' panics to l.
func (m multiObserver) withLogger(l *slog.Logger) multiObserver {
	m.logger = l
	return m
}

// each calls f with every part, recovering a panic of each (logged as
// event's) so that the parts after it still get the event.
func (m multiObserver) each(event string, f func(o Observer)) {
	for _, o := range m.parts {
		m.each1(event, func() { f(o) })
	}
}

func (m multiObserver) Acquired(key string, token uint64, latency time.Duration) {
	m.each("Acquired", func(o Observer) { o.Acquired(key, token, latency) })
}

func (m multiObserver) Released(key string, token uint64) {
	m.each("Released", func(o Observer) { o.Released(key, token) })
}

func (m multiObserver) Extended(key string, token uint64) {
	m.each("Extended", func(o Observer) { o.Extended(key, token) })
}

func (m multiObserver) Lost(key string, token uint64) {
	m.each("Lost", func(o Observer) { o.Lost(key, token) })
}

func (m multiObserver) NodeError(err *NodeError) {
	m.each("NodeError", func(o Observer) { o.NodeError(err) })
}

func (m multiObserver) AcquireReturned(key string, token uint64, err error, waited time.Duration) {
	m.each("AcquireReturned", func(o Observer) {
		if a, ok := o.(AcquireObserver); ok {
			a.AcquireReturned(key, token, err, waited)
		}
	})
}

func (m multiObserver) HoldEnded(key string, token uint64, held time.Duration) {
	m.each("HoldEnded", func(o Observer) {
		if h, ok := o.(HoldObserver); ok {
			h.HoldEnded(key, token, held)
		}
	})
}

func (m multiObserver) Reacquired(key string, token uint64, node int) {
	m.each("Reacquired", func(o Observer) {
		if r, ok := o.(ReacquireObserver); ok {
			r.Reacquired(key, token, node)
		}
	})
}

func (m multiObserver) NodeRoundTrip(node int, d time.Duration) {
	m.each("NodeRoundTrip", func(o Observer) {
		if r, ok := o.(RoundTripObserver); ok {
			r.NodeRoundTrip(node, d)
		}
	})
}

func (m multiObserver) StartOp(ctx context.Context, op Op, key string, token uint64) OpTrace {
	var traces multiTrace
	m.each("StartOp", func(o Observer) {
		if t, ok := o.(Tracer); ok {
			if ot := t.StartOp(ctx, op, key, token); ot != nil {
				traces.parts = append(traces.parts, ot)
			}
		}
	})
	if len(traces.parts) == 0 {
		return nil
	}
	traces.m = m
	return traces
}

// hooks is the union of the parts' optional interfaces.
func (m multiObserver) hooks() hooks {
	var h hooks
	for _, o := range m.parts {
		p := hooksOf(o)
		h.acquire, h.hold, h.trip, h.trace = h.acquire || p.acquire, h.hold || p.hold, h.trip || p.trip, h.trace || p.trace
		h.reacquire = h.reacquire || p.reacquire
	}
	return h
}

// multiTrace is the traces the parts started; a panic in one is recovered
// and logged, and the others still get the call.
type multiTrace struct {
	parts []OpTrace
	m     multiObserver
}

func (mt multiTrace) Node(node int, d time.Duration, err error) {
	for _, t := range mt.parts {
		mt.m.each1("OpTrace.Node", func() { t.Node(node, d, err) })
	}
}

func (mt multiTrace) End(token uint64, err error) {
	for _, t := range mt.parts {
		mt.m.each1("OpTrace.End", func() { t.End(token, err) })
	}
}

// each1 calls f, recovering and logging a panic as event's.
func (m multiObserver) each1(event string, f func()) {
	logger := m.logger
	if logger == nil {
		logger = slog.New(discardHandler{})
	}
	safeObserver{logger: logger}.call(event, f)
}
