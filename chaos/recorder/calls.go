package recorder

import (
	"slices"
	"time"

	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/history"
)

// Client is a client of the lock, as Recorder.Client names it: it records
// the calls that client makes.
type Client struct {
	r     *Recorder
	index int
}

// Acquire records that the client calls the lock's acquire (Lock, TryLock)
// for key.
func (c *Client) Acquire(key string) *AcquireCall {
	return &AcquireCall{c.r, c.r.begin(history.Op{Kind: history.KindAcquire, Client: c.index, Key: key})}
}

// Fault records that a client-side fault of kind (such as fault.ClientPause)
// starts now on the client.
func (c *Client) Fault(kind fault.Kind) *FaultCall {
	return &FaultCall{c.r, c.r.begin(history.Op{Kind: history.KindFault, Fault: kind, Client: c.index})}
}

// FaultAt records a client-side fault of kind on the client that is already
// over, as Recorder.NodeFaultAt does for a node.
func (c *Client) FaultAt(kind fault.Kind, start, end time.Time, err error) {
	c.r.faultAt(history.Op{Kind: history.KindFault, Fault: kind, Client: c.index}, start, end, err)
}

// AcquireCall is an acquire in flight.
type AcquireCall struct {
	r  *Recorder
	id int
}

// Value records the lock value of the hold (with fencedlock, Lock.Value()),
// for the reader of the history; call it before OK. It returns c.
func (c *AcquireCall) Value(value string) *AcquireCall {
	c.r.update(c.id, func(op *history.Op) { op.Value = value })
	return c
}

// Granted records the nodes whose grants counted toward the hold's token
// (indexes of the lock's nodes, as fault lines name them; with fencedlock,
// Lock.Nodes()), so that the checker blames a node fault only on the holds
// it could reach; call it before OK. It returns c.
func (c *AcquireCall) Granted(nodes []int) *AcquireCall {
	c.r.update(c.id, func(op *history.Op) { op.Granted = slices.Clone(nodes) })
	return c
}

// OK records that the lock was acquired with a fencing token (> 0; with
// fencedlock, Lock.Token()), valid until until on the Recorder's clock
// (Lock.Until(), when both use the real clock). A zero until records no
// validity end, for a holder that relies on a lost signal alone (a hold the
// lock extends by itself). The Hold records the operations under this
// acquisition.
func (c *AcquireCall) OK(token uint64, until time.Time) Hold {
	op, _ := c.r.complete(c.id, history.OK, nil, func(op *history.Op, now time.Duration) {
		op.Token = token
		op.ValidUntil = c.r.validUntil(now, until)
	})
	return Hold{r: c.r, acquire: op}
}

// Fail records that the acquire failed with err: refused, timed out,
// cancelled.
func (c *AcquireCall) Fail(err error) { c.r.complete(c.id, history.Failed, err, nil) }

// Hold is a successful acquisition: it records the operations made under it.
type Hold struct {
	r       *Recorder
	acquire history.Op // the acquire, completed
}

// Token returns the hold's fencing token.
func (h Hold) Token() uint64 { return h.acquire.Token }

// Value returns the hold's lock value (see AcquireCall.Value).
func (h Hold) Value() string { return h.acquire.Value }

// Key returns the hold's lock key.
func (h Hold) Key() string { return h.acquire.Key }

// begin records the invocation of op, an op under h.
func (h Hold) begin(op history.Op) int {
	a := h.acquire
	op.Client, op.Key, op.Hold, op.Token, op.Value = a.Client, a.Key, a.ID, a.Token, a.Value
	return h.r.begin(op)
}

// Write records that the holder writes entry to resource with the hold's
// token, through a fencing guard. Entries must be unique within the
// history, and a resource written under one lock key only: tokens are
// compared per resource.
func (h Hold) Write(resource, entry string) *WriteCall {
	return &WriteCall{h.r, h.begin(history.Op{Kind: history.KindWrite, Resource: resource, Entry: entry})}
}

// WriteCall is a fenced write in flight.
type WriteCall struct {
	r  *Recorder
	id int
}

// Seq records the store's own order of the write, for a store that says
// (1, 2, ...; 0 is none); call it before Accepted. It returns c.
func (c *WriteCall) Seq(seq uint64) *WriteCall {
	c.r.update(c.id, func(op *history.Op) { op.Seq = seq })
	return c
}

// Accepted records that the store took the write.
func (c *WriteCall) Accepted() { c.r.complete(c.id, history.OK, nil, nil) }

// Rejected records that the store refused the token as stale
// (fencing.ErrStaleToken).
func (c *WriteCall) Rejected() { c.r.complete(c.id, history.Rejected, nil, nil) }

// Fail records that the write failed with err, so that whether it landed is
// unknown.
func (c *WriteCall) Fail(err error) { c.r.complete(c.id, history.Failed, err, nil) }

// Extend records that the holder calls the lock's extend.
func (h Hold) Extend() *ExtendCall {
	return &ExtendCall{h.r, h.begin(history.Op{Kind: history.KindExtend})}
}

// ExtendCall is an extend in flight.
type ExtendCall struct {
	r  *Recorder
	id int
}

// Reacquired records the nodes (indexes of the lock's nodes) on which the
// hold's key was re-created (fencedlock with
// redlock.WithReacquireOnExtend) that the holder has seen since the
// hold's last recorded extension: with fencedlock, what Lock.Reacquired
// lists beyond what earlier extensions recorded. A re-create that answers
// after its Extend returned goes with the next one recorded. Call it
// before the outcome; none (an empty list) records nothing. It returns c.
func (c *ExtendCall) Reacquired(nodes []int) *ExtendCall {
	if len(nodes) > 0 {
		c.r.update(c.id, func(op *history.Op) { op.Reacquired = slices.Clone(nodes) })
	}
	return c
}

// OK records that the hold was extended, now valid until until (see
// AcquireCall.OK).
func (c *ExtendCall) OK(until time.Time) {
	c.r.complete(c.id, history.OK, nil, func(op *history.Op, now time.Duration) {
		op.ValidUntil = c.r.validUntil(now, until)
	})
}

// LockLost records that the extend found the lock no longer held
// (redlock.ErrLockLost).
func (c *ExtendCall) LockLost() { c.r.complete(c.id, history.LockLost, nil, nil) }

// Fail records that the extend failed with err.
func (c *ExtendCall) Fail(err error) { c.r.complete(c.id, history.Failed, err, nil) }

// Release records that the holder calls the lock's release (Unlock).
func (h Hold) Release() *ReleaseCall {
	return &ReleaseCall{h.r, h.begin(history.Op{Kind: history.KindRelease})}
}

// ReleaseCall is a release in flight.
type ReleaseCall struct {
	r  *Recorder
	id int
}

// OK records that the release succeeded.
func (c *ReleaseCall) OK() { c.r.complete(c.id, history.OK, nil, nil) }

// LockLost records that the release found the lock no longer held
// (redlock.ErrLockLost).
func (c *ReleaseCall) LockLost() { c.r.complete(c.id, history.LockLost, nil, nil) }

// Fail records that the release failed with err.
func (c *ReleaseCall) Fail(err error) { c.r.complete(c.id, history.Failed, err, nil) }

// Lost records that the holder saw now that it lost the lock (with
// fencedlock, Lock.Done() closed before Unlock): from then on it must not
// act as holder. Done() closes on Unlock too: a lost signal after the
// release changes nothing.
func (h Hold) Lost() {
	h.r.complete(h.begin(history.Op{Kind: history.KindLost}), history.OK, nil, func(op *history.Op, _ time.Duration) {
		op.Complete = op.Invoke // an instant: the invocation is the moment
	})
}

// FaultCall is a fault in progress.
type FaultCall struct {
	r  *Recorder
	id int
}

// End records that the fault ended: the node restarted, resumed or healed,
// the skew or latency was removed, the client went on.
func (c *FaultCall) End() { c.r.complete(c.id, history.OK, nil, nil) }

// Fail records that the fault could not be injected or undone: the check
// then gives no verdict but unknown, unless a violation shows anyway.
func (c *FaultCall) Fail(err error) { c.r.complete(c.id, history.Failed, err, nil) }
