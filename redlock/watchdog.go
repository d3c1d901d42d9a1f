package redlock

import (
	"context"
	"errors"
	"time"
)

// The watchdog of an auto-extended hold (AutoExtend) extends it about every
// third of its TTL, through the Client's scheduler (scheduler.go). Its rule:
// a hold is lost only when a quorum of nodes says it is gone (Extend's
// ErrLockLost) or when its validity runs out. An extension that failed on
// node errors or timeouts says neither, so it is tried again while another
// try can still land within the validity (see retryAt).

// startWatchdog schedules the hold's first extension, a third of its
// validity from now. A Client that is closed already ends the hold at once.
func (l *Lock) startWatchdog() {
	l.mu.Lock()
	l.auto = true
	now := l.a.c.cfg.clock.Now()
	l.extendAt = thirdOf(now, l.until)
	scheduled := l.scheduleLocked()
	l.mu.Unlock()
	if !scheduled {
		l.end(true)
	}
}

// due is the scheduler's call when the hold's due time came: it ends the
// hold whose validity ran out, or sends the watchdog's extension, and
// schedules what is due next.
func (l *Lock) due(now time.Time) {
	l.mu.Lock()
	if l.ended {
		l.mu.Unlock()
		return
	}
	if !now.Before(l.until) {
		l.mu.Unlock()
		l.end(true)
		return
	}
	extend := l.auto && !l.extending && !l.extendAt.IsZero() && !now.Before(l.extendAt)
	if extend {
		l.extending = true // the validity's end stays scheduled meanwhile
	}
	scheduled := l.scheduleLocked()
	l.mu.Unlock()
	switch {
	case !scheduled:
		l.end(true)
	case extend:
		l.a.c.sched.extend(l)
	}
}

// watchdogExtend is one extension of the watchdog, on a worker of the
// scheduler. It schedules the next one: a third of the TTL after it began, or, after
// a failure that did not say the hold is gone, a retry (retryAt).
func (l *Lock) watchdogExtend() {
	c := l.a.c
	ttl := l.a.ttl
	err := errNotRun // a panic below (an Observer's) counts as a failure to retry
	start := c.cfg.clock.Now()
	defer func() {
		l.mu.Lock()
		l.extending = false
		switch {
		case err == nil: // its validity counts from start
			l.extendAt = thirdOf(start, l.until)
		case errors.Is(err, ErrLockLost): // extend ended the hold
		default:
			l.extendAt = l.retryAtLocked(start)
		}
		scheduled := l.scheduleLocked()
		l.mu.Unlock()
		if !scheduled {
			l.end(true)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), tryBound(c.nodeTimeout(ttl)))
	defer cancel()
	err = l.extend(ctx, ttl)
	if err != nil && !errors.Is(err, ErrLockLost) {
		c.cfg.logger.Debug("redlock: extension failed, to be tried again while validity is left",
			"key", l.a.key(), "token", l.token, "err", err)
	}
}

var errNotRun = errors.New("redlock: extension did not run")

// tryBound is the real time one extension can take: it may wait for the
// handle's Extend or Unlock before it (a fan-out, bounded by the node
// timeout), then sends its own (bounded by it too).
func tryBound(nodeTimeout time.Duration) time.Duration { return mulSat(nodeTimeout, 2) }

// retryAtLocked is when an extension that failed, begun at start, is tried
// again: halfway through the validity that was left beyond what a try
// takes (tryBound), so that each retry leaves as much room again for the
// ones after it, and they come closer together as the end nears (each try
// takes time, so they end). None (zero) once that room is gone: a try could
// no longer land before the keys it would extend expire, and Done closes at
// Until. l.mu is held.
func (l *Lock) retryAtLocked(start time.Time) time.Time {
	room := l.until.Sub(start) - tryBound(l.a.c.nodeTimeout(l.a.ttl))
	if room <= 0 {
		return time.Time{}
	}
	return start.Add(room / 2)
}

// thirdOf is when a third of the validity from start to until has passed:
// the watchdog's next extension, which leaves two thirds for it and its
// retries (a third of the TTL would be after until with a large drift
// factor, or after a caller's Extend to a shorter TTL).
func thirdOf(start, until time.Time) time.Time {
	return start.Add(max(until.Sub(start), 0) / 3)
}
