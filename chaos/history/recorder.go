package history

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/clock"
)

// Recorder builds a History while a run goes on. It is safe for concurrent
// use: client goroutines and the fault scheduler call it at the same time.
// Each operation is stamped when the call is made, under the Recorder's lock,
// so that stamps follow the order in which the calls happened: record an
// invocation just before the call it describes, and a completion just after.
//
// Calls that complete an operation (AcquireCall.OK, WriteCall.Accepted, ...)
// panic if the operation was already completed: that is a bug in the workload.
// Make a Recorder with NewRecorder; the zero Recorder is not usable.
type Recorder struct {
	clock clock.PassiveClock
	start time.Time
	nodes int

	mu    sync.Mutex // protects ops, final, stats, watch
	ops   []Op
	final map[string][]string
	stats Stats
	watch func(Op)
}

// Stats are running counts, cheap to read while the run goes on.
type Stats struct {
	Elapsed         time.Duration // time since the recorder was made
	Acquisitions    int           // successful acquires
	AcquireFailures int           // failed acquires
	Faults          int           // faults started
	Writes          int           // writes accepted
	StaleRejected   int           // writes rejected as stale
}

// NewRecorder returns a Recorder whose clock starts now on c; nodes is the
// number of lock nodes of the run.
func NewRecorder(c clock.PassiveClock, nodes int) *Recorder {
	return &Recorder{clock: c, start: c.Now(), nodes: nodes}
}

// Now returns the current offset on the history clock.
func (r *Recorder) Now() time.Duration { return r.clock.Since(r.start) }

// Offset returns t as an offset on the history clock.
func (r *Recorder) Offset(t time.Time) time.Duration { return t.Sub(r.start) }

// begin appends op, stamped now, and returns its ID.
func (r *Recorder) begin(op Op) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	op.ID = len(r.ops) + 1
	op.Invoke = r.Now()
	r.ops = append(r.ops, op)
	r.notify(op)
	return op.ID
}

// complete stamps op id complete now, with outcome, after set has filled in
// the result fields. It returns the completed op.
func (r *Recorder) complete(id int, outcome Outcome, set func(*Op)) Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	op := &r.ops[id-1]
	if op.Outcome != Pending {
		panic("history: " + string(op.Kind) + " completed twice")
	}
	op.Complete = r.Now()
	op.Outcome = outcome
	if set != nil {
		set(op)
	}
	r.notify(*op)
	return *op
}

// Hold identifies a successful acquisition; writes, releases and lost
// signals name the hold they belong to.
type Hold struct {
	ID     int // the acquire's op ID
	Client int
	Key    string
	Token  uint64
	Value  string
}

// AcquireCall is an acquire in flight.
type AcquireCall struct {
	r  *Recorder
	id int
}

// Acquire records that client calls Lock for key.
func (r *Recorder) Acquire(client int, key string) AcquireCall {
	return AcquireCall{r, r.begin(Op{Kind: KindAcquire, Client: client, Key: key})}
}

// OK records that the lock was acquired with token and value, valid for
// validFor from now as the client sees it: Lock.Until() minus the client's
// own clock reading. A validFor of zero records no validity end, for a client
// that relies on Done() alone (a hold the library extends by itself); such a
// hold lasts until released or lost. The returned Hold is passed to Write,
// Extend, Release and Lost.
func (c AcquireCall) OK(token uint64, value string, validFor time.Duration) Hold {
	return c.OKGranted(token, value, validFor, nil)
}

// OKGranted is OK for a lock that tells which nodes granted the hold:
// granted are their indexes, the nodes whose grants counted toward the
// token. The checker then blames a node fault only on the holds it could
// reach (see Op.Granted).
func (c AcquireCall) OKGranted(token uint64, value string, validFor time.Duration, granted []int) Hold {
	op := c.r.complete(c.id, OK, func(op *Op) {
		op.Token, op.Value = token, value
		op.ValidUntil = validUntil(op.Complete, validFor)
		if granted != nil {
			op.Granted = slices.Clone(granted)
		}
		c.r.stats.Acquisitions++
	})
	return Hold{ID: op.ID, Client: op.Client, Key: op.Key, Token: token, Value: value}
}

// Fail records that the acquire failed with err.
func (c AcquireCall) Fail(err error) {
	c.r.complete(c.id, Failed, func(op *Op) {
		op.Err = errString(err)
		c.r.stats.AcquireFailures++
	})
}

// ExtendCall is an extend in flight.
type ExtendCall struct {
	r  *Recorder
	id int
}

// Extend records that the holder of h calls Extend.
func (r *Recorder) Extend(h Hold) ExtendCall {
	return ExtendCall{r, r.begin(holdOp(KindExtend, h))}
}

// OK records that the hold was extended, now valid for validFor as the
// client sees it (see AcquireCall.OK).
func (c ExtendCall) OK(validFor time.Duration) {
	c.r.complete(c.id, OK, func(op *Op) { op.ValidUntil = validUntil(op.Complete, validFor) })
}

// LockLost records that the extend found the hold no longer on a quorum.
func (c ExtendCall) LockLost() { c.r.complete(c.id, LockLost, nil) }

// Fail records that the extend failed with err.
func (c ExtendCall) Fail(err error) {
	c.r.complete(c.id, Failed, func(op *Op) { op.Err = errString(err) })
}

// ReleaseCall is a release in flight.
type ReleaseCall struct {
	r  *Recorder
	id int
}

// Release records that the holder of h calls Unlock.
func (r *Recorder) Release(h Hold) ReleaseCall {
	return ReleaseCall{r, r.begin(holdOp(KindRelease, h))}
}

// OK records that the release succeeded.
func (c ReleaseCall) OK() { c.r.complete(c.id, OK, nil) }

// LockLost records that the release found the hold no longer on a quorum.
func (c ReleaseCall) LockLost() { c.r.complete(c.id, LockLost, nil) }

// Fail records that the release failed with err.
func (c ReleaseCall) Fail(err error) {
	c.r.complete(c.id, Failed, func(op *Op) { op.Err = errString(err) })
}

// WriteCall is a fenced write in flight.
type WriteCall struct {
	r  *Recorder
	id int
}

// Write records that the holder of h writes entry to resource with h's token.
// Entries must be unique within the run, and a resource written under one
// lock key only: tokens are compared per resource.
func (r *Recorder) Write(h Hold, resource, entry string) WriteCall {
	op := holdOp(KindWrite, h)
	op.Resource, op.Entry = resource, entry
	return WriteCall{r, r.begin(op)}
}

// Accepted records that the store accepted the write as its seq-th write to
// the resource (1, 2, ...; 0 if the store does not say).
func (c WriteCall) Accepted(seq uint64) {
	c.r.complete(c.id, OK, func(op *Op) {
		op.Seq = seq
		c.r.stats.Writes++
	})
}

// Rejected records that the store refused the token as stale.
func (c WriteCall) Rejected() {
	c.r.complete(c.id, Rejected, func(*Op) { c.r.stats.StaleRejected++ })
}

// Fail records that the write failed with err: whether it landed is unknown.
func (c WriteCall) Fail(err error) {
	c.r.complete(c.id, Failed, func(op *Op) { op.Err = errString(err) })
}

// Lost records that the holder of h saw h's Done() channel closed. Done()
// closes on Unlock too: a lost signal after the release changes nothing.
func (r *Recorder) Lost(h Hold) {
	id := r.begin(holdOp(KindLost, h))
	r.complete(id, OK, func(op *Op) { op.Complete = op.Invoke })
}

// FaultCall is a fault in progress.
type FaultCall struct {
	r  *Recorder
	id int
}

// Fault records that a fault of kind starts now on target: a node index, or
// a client index when kind.ClientSide().
func (r *Recorder) Fault(kind fault.Kind, target int) FaultCall {
	op := Op{Kind: KindFault, Fault: kind}
	if kind.ClientSide() {
		op.Client = target
	} else {
		op.Node = target
	}
	r.mu.Lock()
	r.stats.Faults++
	r.mu.Unlock()
	return FaultCall{r, r.begin(op)}
}

// End records that the fault ended: the node restarted, resumed or healed,
// or the skew or latency was removed.
func (c FaultCall) End() { c.r.complete(c.id, OK, nil) }

// Fail records that the fault could not be injected, or not undone, with
// err. Check gives no verdict but unknown to a history with a failed fault.
func (c FaultCall) Fail(err error) {
	c.r.complete(c.id, Failed, func(op *Op) { op.Err = errString(err) })
}

// FaultAt records a fault that is already over, from start to end on the
// recorder's clock: for fault runners that report a fault when it ended.
// A non-nil err records it as failed (see FaultCall.Fail).
func (r *Recorder) FaultAt(kind fault.Kind, target int, start, end time.Time, err error) {
	op := Op{Kind: KindFault, Fault: kind, Outcome: OK,
		Invoke: start.Sub(r.start), Complete: max(end.Sub(r.start), start.Sub(r.start))}
	if err != nil {
		op.Outcome, op.Err = Failed, err.Error()
	}
	if kind.ClientSide() {
		op.Client = target
	} else {
		op.Node = target
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stats.Faults++
	op.ID = len(r.ops) + 1
	r.ops = append(r.ops, op)
	r.notify(op)
}

// Watch makes r call f with every op as it is recorded: once when it is
// invoked (Outcome Pending) and once more when it completes (a fault that
// FaultAt records: once, complete). f is called under r's lock,
// in the order the stamps were made, so it sees an op's invocation before
// its completion; it must not call r. A nil f stops the calls.
func (r *Recorder) Watch(f func(Op)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.watch = f
}

// notify passes op to the watcher, if any; r.mu is held.
func (r *Recorder) notify(op Op) {
	if r.watch != nil {
		r.watch(op)
	}
}

// FinalStore records the store's contents for resource at the end of the
// run: every entry it holds, in the store's order. Call it once for every
// resource written (an unlisted resource counts as empty once any is listed).
func (r *Recorder) FinalStore(resource string, entries []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.final == nil {
		r.final = make(map[string][]string)
	}
	r.final[resource] = slices.Clone(entries)
}

// Stats returns the running counts.
func (r *Recorder) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.stats
	s.Elapsed = r.Now()
	return s
}

// History returns a copy of what was recorded so far, ending now.
func (r *Recorder) History() History {
	r.mu.Lock()
	defer r.mu.Unlock()
	var final map[string][]string
	if r.final != nil {
		final = make(map[string][]string, len(r.final))
		for k, v := range maps.All(r.final) {
			final[k] = slices.Clone(v)
		}
	}
	return History{Nodes: r.nodes, Ops: slices.Clone(r.ops), Final: final, End: r.Now()}
}

func holdOp(kind Kind, h Hold) Op {
	return Op{Kind: kind, Client: h.Client, Key: h.Key, Hold: h.ID, Token: h.Token, Value: h.Value}
}

// validUntil maps a validity the client measured at now onto the history
// clock; zero stays zero (no validity end).
func validUntil(now, validFor time.Duration) time.Duration {
	if validFor == 0 {
		return 0
	}
	return now + validFor
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
