package redlockotel

import (
	"context"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/fencedlock/fencedlock/fencing"
	"github.com/fencedlock/fencedlock/redlock"
	"github.com/fencedlock/fencedlock/redlock/internal/outcome"
)

// Metrics records, through the OpenTelemetry metric API, what package
// redlockprom exports to Prometheus (docs/metrics.md lists both): it is a
// redlock.Observer with the optional AcquireObserver, HoldObserver and
// RoundTripObserver, and a fencing.GuardObserver. It is safe for
// concurrent use. Combine it with a Tracer through redlock.Observers.
type Metrics struct {
	redlock.NopObserver

	acquires   metric.Int64Counter
	acquireDur metric.Float64Histogram
	extensions metric.Int64Counter
	losses     metric.Int64Counter
	releases   metric.Int64Counter
	nodeErrors metric.Int64Counter
	reacquired metric.Int64Counter
	holdDur    metric.Float64Histogram
	roundTrips metric.Float64Histogram
	held       metric.Int64UpDownCounter
	admitted   metric.Int64Counter
	rejected   metric.Int64Counter

	outcomes map[string]metric.MeasurementOption // outcome → its attribute, built once
}

var (
	_ redlock.Observer          = (*Metrics)(nil)
	_ redlock.AcquireObserver   = (*Metrics)(nil)
	_ redlock.HoldObserver      = (*Metrics)(nil)
	_ redlock.RoundTripObserver = (*Metrics)(nil)
	_ redlock.ReacquireObserver = (*Metrics)(nil)
	_ fencing.GuardObserver     = (*Metrics)(nil)
)

// OutcomeKey is the attribute of an acquisition's outcome on the metrics.
const OutcomeKey = attribute.Key("outcome")

// NewMetrics returns Metrics whose instruments come from mp (e.g.
// otel.GetMeterProvider()); a nil mp is the global provider. It returns
// the first error of creating an instrument.
func NewMetrics(mp metric.MeterProvider) (*Metrics, error) {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	meter := mp.Meter(ScopeName)
	m := &Metrics{outcomes: make(map[string]metric.MeasurementOption, len(outcome.All))}
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := meter.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	seconds := func(name, desc string) metric.Float64Histogram {
		h, err := meter.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc))
		errs = append(errs, err)
		return h
	}
	m.acquires = counter("fencedlock.acquires", "{call}", "TryLock and Lock calls (Do's included) by outcome.")
	m.acquireDur = seconds("fencedlock.acquire.wait", "Time from a TryLock or Lock call to its return, by outcome.")
	m.extensions = counter("fencedlock.extensions", "{extension}", "Extensions that reached a quorum (Extend and the watchdog).")
	m.losses = counter("fencedlock.losses", "{hold}", "Holds that ended other than by Unlock, or that Unlock found gone.")
	m.releases = counter("fencedlock.releases", "{hold}", "Unlocks that reached a quorum.")
	m.nodeErrors = counter("fencedlock.node.errors", "{call}", "Failed calls to a node, by node index and address.")
	m.reacquired = counter("fencedlock.reacquired", "{key}", "Keys an extension re-created on a node that had lost them (WithReacquireOnExtend), by node index.")
	m.holdDur = seconds("fencedlock.hold.duration", "Time from an acquisition to the end of its hold.")
	m.roundTrips = seconds("fencedlock.node.round_trip", "Time from queueing a call to a node to its reply, by node index.")
	held, err := meter.Int64UpDownCounter("fencedlock.held_locks", metric.WithUnit("{hold}"),
		metric.WithDescription("Holds acquired and not yet ended."))
	errs = append(errs, err)
	m.held = held
	m.admitted = counter("fencedlock.fencing.admitted", "{token}", "Tokens that a fencing guard admitted.")
	m.rejected = counter("fencedlock.fencing.rejected", "{token}", "Stale tokens that a fencing guard refused.")
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	for _, o := range outcome.All {
		m.outcomes[o] = metric.WithAttributeSet(attribute.NewSet(OutcomeKey.String(o)))
	}
	return m, nil
}

// The observers' calls carry no ctx: measurements are recorded without one.
var bg = context.Background()

// Acquired counts a hold as held.
func (m *Metrics) Acquired(string, uint64, time.Duration) { m.held.Add(bg, 1) }

// AcquireReturned counts an acquisition call by outcome, with its wait.
func (m *Metrics) AcquireReturned(_ string, _ uint64, err error, waited time.Duration) {
	o := m.outcomes[outcome.Of(err)]
	m.acquires.Add(bg, 1, o)
	m.acquireDur.Record(bg, waited.Seconds(), o)
}

// Released counts an Unlock that reached a quorum.
func (m *Metrics) Released(string, uint64) { m.releases.Add(bg, 1) }

// Extended counts an extension that reached a quorum.
func (m *Metrics) Extended(string, uint64) { m.extensions.Add(bg, 1) }

// Lost counts a lost hold.
func (m *Metrics) Lost(string, uint64) { m.losses.Add(bg, 1) }

// Reacquired counts a key re-created on a node.
func (m *Metrics) Reacquired(_ string, _ uint64, node int) {
	m.reacquired.Add(bg, 1, metric.WithAttributes(NodeAttr.Int(node)))
}

// NodeError counts a node's failed call.
func (m *Metrics) NodeError(err *redlock.NodeError) {
	m.nodeErrors.Add(bg, 1, metric.WithAttributes(NodeAttr.Int(err.Node), attribute.String("addr", err.Addr)))
}

// HoldEnded records a hold's duration; it is no longer held.
func (m *Metrics) HoldEnded(_ string, _ uint64, held time.Duration) {
	m.held.Add(bg, -1)
	m.holdDur.Record(bg, held.Seconds())
}

// NodeRoundTrip records a node's round trip.
func (m *Metrics) NodeRoundTrip(node int, d time.Duration) {
	m.roundTrips.Record(bg, d.Seconds(), metric.WithAttributes(NodeAttr.Int(node)))
}

// Admitted counts a token a guard admitted.
func (m *Metrics) Admitted(string, uint64) { m.admitted.Add(bg, 1) }

// Rejected counts a stale token a guard refused.
func (m *Metrics) Rejected(string, uint64, uint64) { m.rejected.Add(bg, 1) }
