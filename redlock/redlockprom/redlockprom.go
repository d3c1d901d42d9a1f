// Package redlockprom exports the events of package redlock's locks and of
// package fencing's guards as Prometheus metrics. A [*Metrics] is the
// Observer of any number of redlock Clients (redlock.WithObserver) and the
// GuardObserver of any number of guards (fencing.WithObserver); every
// metric name begins with "fencedlock_". It lives in a package of its own
// so that a program that uses redlock without it links no Prometheus code.
//
// Keys and resources are never labels: their number is unbounded. The
// metrics and their labels are listed in docs/metrics.md.
package redlockprom

import (
	"errors"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencedlock/fencedlock/fencing"
	"github.com/fencedlock/fencedlock/redlock"
	"github.com/fencedlock/fencedlock/redlock/internal/outcome"
)

// Outcomes of an acquisition call, the values of the outcome label.
const (
	Acquired         = outcome.Acquired         // the call returned a hold
	Refused          = outcome.Refused          // the key is held, or the retry strategy gave up
	NodeError        = outcome.NodeError        // failed with node errors (among them, too few nodes granted)
	Canceled         = outcome.Canceled         // the caller's ctx was cancelled
	DeadlineExceeded = outcome.DeadlineExceeded // the caller's ctx deadline passed
)

// durationBuckets are the upper bounds, in seconds, of every histogram:
// from 100µs (a loopback round trip) up by a factor of 4 per bucket to
// about 26s (a long wait or hold), 10 buckets.
var durationBuckets = prometheus.ExponentialBuckets(100e-6, 4, 10)

// Metrics is the Prometheus instruments of locks and guards. It implements
// redlock.Observer and its optional AcquireObserver, HoldObserver,
// RoundTripObserver and ReacquireObserver, and fencing.GuardObserver. It is safe for concurrent
// use.
type Metrics struct {
	redlock.NopObserver // the methods below replace every one of it

	acquires   *prometheus.CounterVec
	acquireDur *prometheus.HistogramVec
	extensions prometheus.Counter
	losses     prometheus.Counter
	releases   prometheus.Counter
	nodeErrors *prometheus.CounterVec
	reacquired *prometheus.CounterVec
	holdDur    prometheus.Histogram
	roundTrips *prometheus.HistogramVec
	held       prometheus.Gauge
	admitted   prometheus.Counter
	rejected   prometheus.Counter
}

var (
	_ redlock.Observer          = (*Metrics)(nil)
	_ redlock.AcquireObserver   = (*Metrics)(nil)
	_ redlock.HoldObserver      = (*Metrics)(nil)
	_ redlock.RoundTripObserver = (*Metrics)(nil)
	_ redlock.ReacquireObserver = (*Metrics)(nil)
	_ fencing.GuardObserver     = (*Metrics)(nil)
)

// New returns Metrics registered on reg (prometheus.DefaultRegisterer, or a
// registry of your own). It returns reg's error when a metric of the same
// name is registered already: create one Metrics per registry, and share
// it among Clients and guards.
func New(reg prometheus.Registerer) (*Metrics, error) {
	if reg == nil {
		return nil, errors.New("redlockprom: nil Registerer")
	}
	m := &Metrics{
		acquires: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencedlock_acquire_total",
			Help: "TryLock and Lock calls (Do's included) by outcome.",
		}, []string{"outcome"}),
		acquireDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "fencedlock_acquire_wait_seconds",
			Help:    "Time from a TryLock or Lock call to its return, by outcome.",
			Buckets: durationBuckets,
		}, []string{"outcome"}),
		extensions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fencedlock_extensions_total",
			Help: "Extensions that reached a quorum (Extend and the watchdog).",
		}),
		losses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fencedlock_losses_total",
			Help: "Holds that ended other than by Unlock, or that Unlock found gone.",
		}),
		releases: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fencedlock_releases_total",
			Help: "Unlocks that reached a quorum.",
		}),
		nodeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencedlock_node_errors_total",
			Help: "Failed calls to a node, by node index and address.",
		}, []string{"node", "addr"}),
		reacquired: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencedlock_reacquired_total",
			Help: "Keys an extension re-created on a node that had lost them (WithReacquireOnExtend), by node index.",
		}, []string{"node"}),
		holdDur: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "fencedlock_hold_seconds",
			Help:    "Time from an acquisition to the end of its hold (Unlock, loss or expiry).",
			Buckets: durationBuckets,
		}),
		roundTrips: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "fencedlock_node_round_trip_seconds",
			Help:    "Time from queueing a call to a node to its reply, by node index.",
			Buckets: durationBuckets,
		}, []string{"node"}),
		held: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fencedlock_held_locks",
			Help: "Holds acquired and not yet ended.",
		}),
		admitted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fencedlock_fencing_admitted_total",
			Help: "Tokens that a fencing guard admitted.",
		}),
		rejected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fencedlock_fencing_rejected_total",
			Help: "Stale tokens that a fencing guard refused: writes of former holders kept out.",
		}),
	}
	for _, c := range []prometheus.Collector{m.acquires, m.acquireDur, m.extensions, m.losses, m.releases,
		m.nodeErrors, m.reacquired, m.holdDur, m.roundTrips, m.held, m.admitted, m.rejected} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	// Every outcome is exported from the start, at 0: a rate over a series
	// that appears with its first event misses that event.
	for _, o := range outcome.All {
		m.acquires.WithLabelValues(o)
		m.acquireDur.WithLabelValues(o)
	}
	return m, nil
}

// Outcome is the outcome label of an acquisition call that returned err:
// the ctx's end first, then node errors, else a refusal.
func Outcome(err error) string { return outcome.Of(err) }

// Acquired counts a hold as held; the acquisition itself is counted by
// AcquireReturned.
func (m *Metrics) Acquired(string, uint64, time.Duration) { m.held.Inc() }

// AcquireReturned counts an acquisition call by outcome, with its wait.
func (m *Metrics) AcquireReturned(_ string, _ uint64, err error, waited time.Duration) {
	o := Outcome(err)
	m.acquires.WithLabelValues(o).Inc()
	m.acquireDur.WithLabelValues(o).Observe(waited.Seconds())
}

// Released counts an Unlock that reached a quorum.
func (m *Metrics) Released(string, uint64) { m.releases.Inc() }

// Extended counts an extension that reached a quorum.
func (m *Metrics) Extended(string, uint64) { m.extensions.Inc() }

// Lost counts a lost hold.
func (m *Metrics) Lost(string, uint64) { m.losses.Inc() }

// Reacquired counts a key re-created on a node.
func (m *Metrics) Reacquired(_ string, _ uint64, node int) {
	m.reacquired.WithLabelValues(strconv.Itoa(node)).Inc()
}

// NodeError counts a node's failed call.
func (m *Metrics) NodeError(err *redlock.NodeError) {
	m.nodeErrors.WithLabelValues(strconv.Itoa(err.Node), err.Addr).Inc()
}

// HoldEnded observes a hold's duration; it is no longer held.
func (m *Metrics) HoldEnded(_ string, _ uint64, held time.Duration) {
	m.held.Dec()
	m.holdDur.Observe(held.Seconds())
}

// NodeRoundTrip observes a node's round trip.
func (m *Metrics) NodeRoundTrip(node int, d time.Duration) {
	m.roundTrips.WithLabelValues(strconv.Itoa(node)).Observe(d.Seconds())
}

// Admitted counts a token a guard admitted.
func (m *Metrics) Admitted(string, uint64) { m.admitted.Inc() }

// Rejected counts a stale token a guard refused.
func (m *Metrics) Rejected(string, uint64, uint64) { m.rejected.Inc() }
