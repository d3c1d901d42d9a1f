// Package recorder records a history of lock operations — acquire, extend,
// release, fenced write, lost signal — and faults, as package history checks
// it, from the calls of any program: wrap a Recorder around your own lock
// calls (fencedlock's or any other lock's), recording each call just before
// it is made and its outcome just after it returned. A Recorder stamps every
// operation on one clock and hands it to a Sink: JSONL writes the JSON Lines
// format that `fencedlock check` reads (docs/history-format.md), one line
// per operation when it completes; Memory keeps a history.History that can
// be checked while the recording goes on, as the chaos harness does. A
// Recorder is safe for concurrent use; stamps follow the order in which the
// calls were made. Each call is completed once: a second completion, or one
// after Close, records nothing. A process that dies loses the calls it had
// in flight, so its history says less than it should, never more.
//
// Times are stamped on one clock for the whole history. The default clock is
// the Unix time when the Recorder was made plus the monotonic time since:
// steady within a process, and shared by the processes of one machine to
// within their clocks' agreement at start, so their JSON Lines files can be
// concatenated and checked together. Across machines that agreement is what
// NTP gives; a check is then only as precise as that.
package recorder

import (
	"sync"
	"time"

	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/history"
	"github.com/fencedlock/fencedlock/clock"
)

// Recorder stamps operations and hands them to its Sink. Make one with New;
// the zero Recorder is not usable.
type Recorder struct {
	clock clock.PassiveClock
	start time.Time // on clock; stamps are offsets from it

	mu      sync.Mutex // protects the fields below; serialises stamps and sink calls
	sink    Sink
	clients map[string]int     // client indexes, by name
	ops     int                // operations begun
	pending map[int]history.Op // operations in flight, by ID
	closed  bool               // Close was called: nothing more is recorded
}

// Option configures New.
type Option func(*config)

type config struct {
	clock clock.PassiveClock
	nodes int
}

// WithClock sets the clock that stamps operations and reads the times given
// to the Recorder (validity ends, fault times). Default clock.Real(): JSONL
// stamps are Unix nanoseconds, steady within the process.
func WithClock(c clock.PassiveClock) Option { return func(cfg *config) { cfg.clock = c } }

// WithNodes records that the lock runs on n nodes, so that the check can
// tell when a quorum was up and judge liveness. Default: not recorded.
func WithNodes(n int) Option { return func(cfg *config) { cfg.nodes = n } }

// New returns a Recorder that records into s, its clock starting now. A Sink
// serves one Recorder.
func New(s Sink, opts ...Option) *Recorder {
	cfg := config{clock: clock.Real()}
	for _, o := range opts {
		o(&cfg)
	}
	r := &Recorder{clock: cfg.clock, start: cfg.clock.Now(), sink: s,
		clients: map[string]int{}, pending: map[int]history.Op{}}
	r.mu.Lock()
	defer r.mu.Unlock()
	s.open(run{nodes: cfg.nodes, start: r.start, now: r.Now})
	return r
}

// Now returns the current time on the history clock: the time since the
// Recorder was made.
func (r *Recorder) Now() time.Duration { return r.clock.Since(r.start) }

// Offset returns t, a time on the Recorder's clock, on the history clock.
func (r *Recorder) Offset(t time.Time) time.Duration { return t.Sub(r.start) }

// Client returns the client named name, numbered in the order clients are
// first named. Name each client (a goroutine, a process) uniquely across
// every history checked together; a client holds a key at most once at a
// time. Client panics on an empty name, which the format cannot carry.
func (r *Recorder) Client(name string) *Client {
	if name == "" {
		panic("recorder: a client needs a name")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	i, ok := r.clients[name]
	if !ok {
		i = len(r.clients)
		r.clients[name] = i
		r.sink.client(name)
	}
	return &Client{r: r, index: i}
}

// begin stamps the invocation of op, hands it to the sink and keeps it in
// flight; it returns op's ID.
func (r *Recorder) begin(op history.Op) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops++
	op.ID, op.Invoke = r.ops, r.Now()
	if !r.closed {
		r.pending[op.ID] = op
		r.sink.record(op)
	}
	return op.ID
}

// complete stamps op id complete with outcome and err, lets set fill in the
// result fields (now is the stamp), and hands the op to the sink. It returns
// the op and whether it was in flight.
func (r *Recorder) complete(id int, outcome history.Outcome, err error, set func(op *history.Op, now time.Duration)) (history.Op, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	op, ok := r.pending[id]
	if !ok {
		return op, false
	}
	delete(r.pending, id)
	op.Complete, op.Outcome = r.Now(), outcome
	if err != nil {
		op.Err = err.Error()
	}
	if set != nil {
		set(&op, op.Complete)
	}
	r.sink.record(op)
	return op, true
}

// update lets set change op id while it is in flight, for the data given
// before its outcome.
func (r *Recorder) update(id int, set func(op *history.Op)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if op, ok := r.pending[id]; ok {
		set(&op)
		r.pending[id] = op
	}
}

// validUntil maps until, on the Recorder's clock, onto the history clock at
// stamp now; the zero time is no validity end. Call with mu held.
func (r *Recorder) validUntil(now time.Duration, until time.Time) time.Duration {
	if until.IsZero() {
		return 0
	}
	return now + until.Sub(r.clock.Now())
}

// NodeFault records that a fault of kind starts now on node (an index into
// the lock's nodes), for a system that injects its own faults: the check
// then knows when a quorum was down, and blames violations on the faults
// around them.
func (r *Recorder) NodeFault(kind fault.Kind, node int) *FaultCall {
	return &FaultCall{r, r.begin(history.Op{Kind: history.KindFault, Fault: kind, Node: node})}
}

// NodeFaultAt records a fault of kind on node that is already over, from
// start to end on the Recorder's clock (an end before start counts as
// start): for fault runners that report a fault when it ended. A non-nil
// err records it as failed (see FaultCall.Fail).
func (r *Recorder) NodeFaultAt(kind fault.Kind, node int, start, end time.Time, err error) {
	r.faultAt(history.Op{Kind: history.KindFault, Fault: kind, Node: node}, start, end, err)
}

func (r *Recorder) faultAt(op history.Op, start, end time.Time, err error) {
	op.Invoke = r.Offset(start)
	op.Complete, op.Outcome = max(r.Offset(end), op.Invoke), history.OK
	if err != nil {
		op.Outcome, op.Err = history.Failed, err.Error()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops++
	op.ID = r.ops
	if !r.closed {
		r.sink.record(op)
	}
}

// Store records the final contents of a store resource: every entry it
// holds, in its order. Call it once per resource written, when the writes
// are over, so that the check finds acknowledged writes that were lost.
func (r *Recorder) Store(resource string, entries []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		r.sink.store(resource, entries)
	}
}

// Close ends the recording: the calls still in flight stay never completed
// (JSONL writes them so), and nothing is recorded after. It returns the
// sink's error (JSONL's first write error), and does not close what the sink
// writes to.
func (r *Recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return r.sink.close()
	}
	r.closed = true
	clear(r.pending)
	return r.sink.close()
}
