package redlock_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/redlock"
)

// event is one call of an Observer method.
type event struct {
	kind    string // acquired, released, extended, lost, node-error
	key     string
	token   uint64
	latency time.Duration      // acquired
	nodeErr *redlock.NodeError // node-error
	at      time.Time
}

func (e event) String() string {
	if e.kind == "node-error" {
		return fmt.Sprintf("node-error(%v)", e.nodeErr)
	}
	return fmt.Sprintf("%s(%s, %d)", e.kind, e.key, e.token)
}

// eventLog is an Observer that keeps every event, for tests to wait on.
type eventLog struct {
	mu      sync.Mutex // protects events, changed
	events  []event
	changed chan struct{} // closed and replaced on every event
}

var _ redlock.Observer = (*eventLog)(nil)

func newEventLog() *eventLog { return &eventLog{changed: make(chan struct{})} }

func (r *eventLog) add(e event) {
	e.at = time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *eventLog) Acquired(key string, token uint64, latency time.Duration) {
	r.add(event{kind: "acquired", key: key, token: token, latency: latency})
}
func (r *eventLog) Released(key string, token uint64) {
	r.add(event{kind: "released", key: key, token: token})
}
func (r *eventLog) Extended(key string, token uint64) {
	r.add(event{kind: "extended", key: key, token: token})
}
func (r *eventLog) Lost(key string, token uint64) { r.add(event{kind: "lost", key: key, token: token}) }
func (r *eventLog) NodeError(err *redlock.NodeError) {
	r.add(event{kind: "node-error", nodeErr: err})
}

// all returns the events so far.
func (r *eventLog) all() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]event(nil), r.events...)
}

// count is the number of events so far that match.
func (r *eventLog) count(match func(event) bool) int {
	n := 0
	for _, e := range r.all() {
		if match(e) {
			n++
		}
	}
	return n
}

// await returns the first event that matches, waiting for it at most until
// deadline.
func (r *eventLog) await(t testing.TB, deadline time.Time, what string, match func(event) bool) event {
	t.Helper()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		r.mu.Lock()
		for _, e := range r.events {
			if match(e) {
				r.mu.Unlock()
				return e
			}
		}
		changed := r.changed
		r.mu.Unlock()
		select {
		case <-changed:
		case <-timer.C:
			t.Fatalf("no %s event by the deadline; events: %v", what, r.all())
		}
	}
}

func isKind(kind string) func(event) bool { return func(e event) bool { return e.kind == kind } }

func nodeErrorOf(node int) func(event) bool {
	return func(e event) bool { return e.kind == "node-error" && e.nodeErr.Node == node }
}
