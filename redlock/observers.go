package redlock

import (
	"context"
	"time"
)

// Observers returns an Observer that passes every event to each of obs, in
// order: metrics and tracing side by side. Each optional interface (see
// [AcquireObserver]) reaches those of obs that implement it, and the
// Client calls it only if one of them does. Nil entries are skipped.
func Observers(obs ...Observer) Observer {
	m := make(multiObserver, 0, len(obs))
	for _, o := range obs {
		if o != nil {
			m = append(m, o)
		}
	}
	return m
}

type multiObserver []Observer

func (m multiObserver) Acquired(key string, token uint64, latency time.Duration) {
	for _, o := range m {
		o.Acquired(key, token, latency)
	}
}

func (m multiObserver) Released(key string, token uint64) {
	for _, o := range m {
		o.Released(key, token)
	}
}

func (m multiObserver) Extended(key string, token uint64) {
	for _, o := range m {
		o.Extended(key, token)
	}
}

func (m multiObserver) Lost(key string, token uint64) {
	for _, o := range m {
		o.Lost(key, token)
	}
}

func (m multiObserver) NodeError(err *NodeError) {
	for _, o := range m {
		o.NodeError(err)
	}
}

func (m multiObserver) AcquireReturned(key string, token uint64, err error, waited time.Duration) {
	for _, o := range m {
		if a, ok := o.(AcquireObserver); ok {
			a.AcquireReturned(key, token, err, waited)
		}
	}
}

func (m multiObserver) HoldEnded(key string, token uint64, held time.Duration) {
	for _, o := range m {
		if h, ok := o.(HoldObserver); ok {
			h.HoldEnded(key, token, held)
		}
	}
}

func (m multiObserver) NodeRoundTrip(node int, d time.Duration) {
	for _, o := range m {
		if r, ok := o.(RoundTripObserver); ok {
			r.NodeRoundTrip(node, d)
		}
	}
}

func (m multiObserver) StartOp(ctx context.Context, op Op, key string, token uint64) OpTrace {
	var traces multiTrace
	for _, o := range m {
		if t, ok := o.(Tracer); ok {
			if ot := t.StartOp(ctx, op, key, token); ot != nil {
				traces = append(traces, ot)
			}
		}
	}
	switch len(traces) {
	case 0:
		return nil
	case 1:
		return traces[0]
	}
	return traces
}

// hooks is the union of the parts' optional interfaces.
func (m multiObserver) hooks() hooks {
	var h hooks
	for _, o := range m {
		p := hooksOf(o)
		h.acquire, h.hold, h.trip, h.trace = h.acquire || p.acquire, h.hold || p.hold, h.trip || p.trip, h.trace || p.trace
	}
	return h
}

type multiTrace []OpTrace

func (m multiTrace) Node(node int, d time.Duration, err error) {
	for _, t := range m {
		t.Node(node, d, err)
	}
}

func (m multiTrace) End(token uint64, err error) {
	for _, t := range m {
		t.End(token, err)
	}
}
