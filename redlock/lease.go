package redlock

import (
	"context"
	"time"
)

// Lease returns a copy of parent for one call made under the hold: its
// deadline is the end of the hold's validity as it stands now, less
// margin, and it is cancelled when the hold ends (see [Lock.Done]). Pass
// it to a call that crosses the network (gRPC sends a ctx's deadline to
// the server) so that the callee stops by the time another client may
// hold the key. margin covers what the deadline cannot see: the time the
// callee's last write takes to land, and the drift between this process's
// clock and the callee's.
//
// A context's deadline is on the wall clock, while Until is on the
// Client's clock (see [WithClock]), so the deadline is the wall clock now
// plus the validity left now ([Lock.TTL]) less margin. When margin is at
// least the validity left, the returned context is already done
// ([context.DeadlineExceeded]). A context's deadline never moves: a later
// Extend, or the watchdog's, does not lengthen a lease already derived;
// derive one per call. A negative margin is bad input: the context is
// already cancelled, and [context.Cause] is an [ErrInvalidArgument].
//
// Once the hold ends, [context.Cause] of the context is [ErrLockLost] if it
// ended other than by Unlock, and [context.Canceled] if by Unlock (also an
// Unlock that found the hold gone, which returns ErrLockLost).
// [LockFromContext] finds l in the context. Call the returned CancelFunc
// when the call is over, as for [context.WithTimeout]: it releases what
// the lease holds. A lease costs no goroutine while it lasts.
func (l *Lock) Lease(parent context.Context, margin time.Duration) (context.Context, context.CancelFunc) {
	withLock, cancelCause := context.WithCancelCause(context.WithValue(parent, lockKey{}, l))
	if margin < 0 {
		cancelCause(invalid("lease margin %v is negative", margin))
		return withLock, func() {}
	}
	// Asking for Done has the scheduler end the hold at Until, on the
	// Client's clock, even if nobody else watches it.
	l.Done()
	l.mu.Lock()
	left := addSat(l.until.Sub(l.a.c.cfg.clock.Now()), -margin) // TTL, under the same lock as ended; margin ≥ 0
	if l.ended {
		// Cancelled before the deadline is set, whose cause would hide this
		// one. A hold Unlock ended gives Canceled, as its open leases got,
		// also when the Unlock then found it gone.
		lost := l.lost && !l.unlocked
		l.mu.Unlock()
		cancelCause(endCause(lost))
		return context.WithTimeout(withLock, left)
	}
	ctx, cancelDeadline := context.WithTimeout(withLock, left)
	if l.leases == nil {
		l.leases = make(map[uint64]context.CancelCauseFunc)
	}
	l.leaseSeq++
	id := l.leaseSeq
	l.leases[id] = cancelCause
	l.mu.Unlock()
	forget := func() {
		l.mu.Lock()
		delete(l.leases, id)
		l.mu.Unlock()
	}
	// The lease is forgotten when it ends for any reason (the parent's
	// end, its deadline), so a long hold does not keep every lease it gave.
	stop := context.AfterFunc(ctx, forget)
	return ctx, func() {
		if stop() {
			forget()
		}
		cancelDeadline()
		cancelCause(context.Canceled)
	}
}

// endLeasesLocked takes the hold's leases away to be cancelled, once
// l.mu is released, by cancelLeases. l.mu is held.
func (l *Lock) endLeasesLocked() []context.CancelCauseFunc {
	cancels := make([]context.CancelCauseFunc, 0, len(l.leases))
	for _, c := range l.leases {
		cancels = append(cancels, c)
	}
	l.leases = nil
	return cancels
}

// cancelLeases cancels the leases endLeasesLocked took, with the cause
// that says how the hold ended.
func cancelLeases(cancels []context.CancelCauseFunc, lost bool) {
	for _, c := range cancels {
		c(endCause(lost))
	}
}

// endCause is a lease's cause once the hold ended: lost, or unlocked.
func endCause(lost bool) error {
	if lost {
		return ErrLockLost
	}
	return context.Canceled
}

type lockKey struct{}

// LockFromContext returns the hold whose [Client.Do] or [Lock.Lease] made
// ctx (or an ancestor of it), so that code deep in fn's calls can read its
// Token or derive a Lease without being handed the Lock.
func LockFromContext(ctx context.Context) (*Lock, bool) {
	l, ok := ctx.Value(lockKey{}).(*Lock)
	return l, ok
}
