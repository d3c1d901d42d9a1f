// Package recorder writes a history of a program's lock operations, one JSON
// line per operation, that `fencedlock check` checks as it checks a chaos
// run: mutual exclusion, fencing order, duplicate tokens, stale and lost
// writes, liveness. Wrap a Recorder around your own lock calls — fencedlock's
// or any other lock's — recording each call just before it is made and its
// outcome just after it returned. The format is history.ReadJSONL's
// (docs/history-format.md).
//
// A Recorder is safe for concurrent use. Each operation is written as one
// line, in one Write, when it completes; Close writes the operations still in
// flight as never completed. A process that dies loses the lines of the calls
// it had in flight, so a history from a crashed process says less than it
// should, never more.
//
// Times are stamped on one clock for the whole history. The default clock is
// the Unix time when the Recorder was made plus the monotonic time since:
// steady within a process, and shared by the processes of one machine to
// within their clocks' agreement at start, so their histories can be
// concatenated and checked together. Across machines that agreement is what
// NTP gives; a check is then only as precise as that.
//
// For a chaos run inside one process, package history's Recorder keeps the
// history in memory instead.
package recorder

import (
	"bytes"
	"encoding/json"
	"io"
	"sync"
	"time"

	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/history"
	"github.com/fencedlock/fencedlock/clock"
)

// Recorder writes operations to an io.Writer as they complete. Make one with
// New; the zero Recorder is not usable.
type Recorder struct {
	clock clock.PassiveClock
	start time.Time // on clock
	base  int64     // the stamp of start

	mu      sync.Mutex // protects w, err, pending, next; serialises stamps and writes
	w       io.Writer
	err     error
	pending map[int]history.Line // calls in flight, by call number
	next    int
}

// Option configures New.
type Option func(*config)

type config struct {
	clock clock.PassiveClock
	nodes int
}

// WithClock sets the clock that stamps operations, and reads Until times.
// Default clock.Real(): stamps are Unix nanoseconds, steady within the
// process.
func WithClock(c clock.PassiveClock) Option { return func(cfg *config) { cfg.clock = c } }

// WithNodes records that the lock runs on n nodes, so that the check can
// tell when a quorum was up and judge liveness. Default: not recorded.
func WithNodes(n int) Option { return func(cfg *config) { cfg.nodes = n } }

// New returns a Recorder that writes to w. It writes the run line at once:
// the format version, and the node count given WithNodes. The run lines of
// several Recorders' files agree, so the files can be concatenated.
func New(w io.Writer, opts ...Option) *Recorder {
	cfg := config{clock: clock.Real()}
	for _, o := range opts {
		o(&cfg)
	}
	now := cfg.clock.Now()
	r := &Recorder{clock: cfg.clock, start: now, base: now.UnixNano(), w: w, pending: map[int]history.Line{}}
	r.mu.Lock()
	r.write(history.Line{Kind: history.LineRun, Version: history.FormatVersion, Nodes: cfg.nodes})
	r.mu.Unlock()
	return r
}

// stamp is the current time on the history clock. Call with mu held.
func (r *Recorder) stamp() int64 { return r.base + int64(r.clock.Since(r.start)) }

// write encodes l and writes it in one Write, keeping the first error.
// Call with mu held.
func (r *Recorder) write(l history.Line) {
	if r.err != nil {
		return
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if r.err = enc.Encode(l); r.err == nil {
		_, r.err = r.w.Write(buf.Bytes())
	}
}

// begin stamps the invocation of l and keeps it in flight.
func (r *Recorder) begin(l history.Line) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	inv := r.stamp()
	l.Invoke = &inv
	r.next++
	r.pending[r.next] = l
	return r.next
}

// complete stamps call id complete with outcome, lets set fill in the
// result fields, and writes the line. Completing a call twice does nothing.
func (r *Recorder) complete(id int, outcome history.Outcome, err error, set func(l *history.Line, now int64)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l, ok := r.pending[id]
	if !ok {
		return
	}
	delete(r.pending, id)
	now := r.stamp()
	l.Complete, l.Outcome = &now, string(outcome)
	if err != nil {
		l.Err = err.Error()
	}
	if set != nil {
		set(&l, now)
	}
	r.write(l)
}

// Store records the final contents of a store resource: every entry it
// holds, in its order. Call it once per resource written, when the writes
// are over, so that the check finds acknowledged writes that were lost.
func (r *Recorder) Store(resource string, entries []string) {
	if entries == nil {
		entries = []string{}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.write(history.Line{Kind: history.LineStore, Resource: resource, Entries: entries})
}

// Err returns the first error writing to the Writer; after one, nothing
// more is written.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Close writes the calls still in flight as never completed, and returns
// Err. It does not close the Writer. Calls completed after Close are not
// written.
func (r *Recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id := 1; id <= r.next; id++ {
		if l, ok := r.pending[id]; ok {
			r.write(l)
			delete(r.pending, id)
		}
	}
	return r.err
}

// NodeFault records that a fault of kind starts now on node (an index into
// the lock's nodes), for a system that injects its own faults: the check
// then knows when a quorum was down, and blames violations on the faults
// around them.
func (r *Recorder) NodeFault(kind fault.Kind, node int) *FaultCall {
	return &FaultCall{r, r.begin(history.Line{Kind: string(history.KindFault), Fault: string(kind), Node: &node})}
}

// ClientFault records that a fault of kind (a client-side one, such as
// fault.ClientPause) starts now on client.
func (r *Recorder) ClientFault(kind fault.Kind, client string) *FaultCall {
	return &FaultCall{r, r.begin(history.Line{Kind: string(history.KindFault), Fault: string(kind), Client: client})}
}

// FaultCall is a fault in progress.
type FaultCall struct {
	r  *Recorder
	id int
}

// End records that the fault ended.
func (c *FaultCall) End() { c.r.complete(c.id, history.OK, nil, nil) }

// Fail records that the fault could not be injected or undone: the check
// then gives no verdict but unknown, unless a violation shows anyway.
func (c *FaultCall) Fail(err error) { c.r.complete(c.id, history.Failed, err, nil) }
