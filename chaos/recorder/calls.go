package recorder

import (
	"time"

	"github.com/fencedlock/fencedlock/chaos/history"
)

// AcquireCall is an acquire in flight.
type AcquireCall struct {
	r           *Recorder
	id          int
	client, key string
}

// Acquire records that client calls the lock's acquire (Lock, TryLock) for
// key. Name each client (a goroutine, a process) uniquely across every
// history checked together; a client holds a key at most once at a time.
func (r *Recorder) Acquire(client, key string) *AcquireCall {
	return &AcquireCall{r, r.begin(history.Line{Kind: string(history.KindAcquire), Client: client, Key: key}), client, key}
}

// OK records that the lock was acquired with a fencing token (> 0; with
// fencedlock, Lock.Token()), valid until until as the recorder's clock
// reads it (Lock.Until(), when both use the real clock). A zero until
// records no validity end, for a holder that relies on a lost signal alone.
// The Hold records the operations under this acquisition.
func (c *AcquireCall) OK(token uint64, until time.Time) Hold {
	c.r.complete(c.id, history.OK, nil, func(l *history.Line, now int64) {
		l.Token = token
		l.ValidUntil = c.r.validUntil(now, until)
	})
	return Hold{c.r, c.client, c.key, token}
}

// Fail records that the acquire failed with err: refused, timed out,
// cancelled.
func (c *AcquireCall) Fail(err error) { c.r.complete(c.id, history.Failed, err, nil) }

// validUntil maps until onto the history clock at stamp now. Call with mu
// held.
func (r *Recorder) validUntil(now int64, until time.Time) *int64 {
	if until.IsZero() {
		return nil
	}
	v := now + int64(until.Sub(r.clock.Now()))
	return &v
}

// Hold is a successful acquisition: it records the operations made under it.
type Hold struct {
	r           *Recorder
	client, key string
	token       uint64
}

// Token returns the hold's fencing token.
func (h Hold) Token() uint64 { return h.token }

func (h Hold) line(kind history.Kind) history.Line {
	return history.Line{Kind: string(kind), Client: h.client, Key: h.key, Token: h.token}
}

// Write records that the holder writes entry to resource with the hold's
// token, through a fencing guard. Entries must be unique within the
// history, and a resource written under one lock key only.
func (h Hold) Write(resource, entry string) *WriteCall {
	l := h.line(history.KindWrite)
	l.Resource, l.Entry = resource, entry
	return &WriteCall{h.r, h.r.begin(l)}
}

// WriteCall is a fenced write in flight.
type WriteCall struct {
	r  *Recorder
	id int
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
func (h Hold) Extend() *ExtendCall { return &ExtendCall{h.r, h.r.begin(h.line(history.KindExtend))} }

// ExtendCall is an extend in flight.
type ExtendCall struct {
	r  *Recorder
	id int
}

// OK records that the hold was extended, now valid until until (see
// AcquireCall.OK).
func (c *ExtendCall) OK(until time.Time) {
	c.r.complete(c.id, history.OK, nil, func(l *history.Line, now int64) { l.ValidUntil = c.r.validUntil(now, until) })
}

// LockLost records that the extend found the lock no longer held
// (redlock.ErrLockLost).
func (c *ExtendCall) LockLost() { c.r.complete(c.id, history.LockLost, nil, nil) }

// Fail records that the extend failed with err.
func (c *ExtendCall) Fail(err error) { c.r.complete(c.id, history.Failed, err, nil) }

// Release records that the holder calls the lock's release (Unlock).
func (h Hold) Release() *ReleaseCall {
	return &ReleaseCall{h.r, h.r.begin(h.line(history.KindRelease))}
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
// act as holder.
func (h Hold) Lost() {
	h.r.complete(h.r.begin(h.line(history.KindLost)), history.OK, nil, func(l *history.Line, _ int64) {
		l.Complete, l.Outcome = nil, "" // an instant: the invocation is the moment
	})
}
