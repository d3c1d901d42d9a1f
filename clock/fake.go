package clock

import (
	"context"
	"sync"
	"time"
)

// Fake is a manual clock for tests: its time moves only on Advance and Set,
// and its timers fire only then. BlockUntilContext lets a test wait until the
// code under test has armed its timers, so tests never sleep.
//
// A Fake is safe for concurrent use.
type Fake struct {
	mu        sync.Mutex // protects now, timers, waiters, beforeArm
	now       time.Time
	timers    []*fakeTimer
	waiters   []fakeWaiter
	beforeArm func()
}

// BeforeArm sets f, called each time a timer of the Fake is about to be
// armed (NewTimer, NewTimerAt, Reset), before it is: a test may act there,
// between the code's reading of the clock and its arming of a timer, a
// window it cannot otherwise pick. nil removes it.
func (f *Fake) BeforeArm(hook func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.beforeArm = hook
}

// arming calls the BeforeArm hook, if any, without holding mu.
func (f *Fake) arming() {
	f.mu.Lock()
	hook := f.beforeArm
	f.mu.Unlock()
	if hook != nil {
		hook()
	}
}

type fakeWaiter struct {
	n  int
	ch chan struct{}
}

var _ Clock = (*Fake)(nil)

// NewFake returns a fake clock that reads now.
func NewFake(now time.Time) *Fake { return &Fake{now: now} }

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Since returns f.Now().Sub(t).
func (f *Fake) Since(t time.Time) time.Duration { return f.Now().Sub(t) }

// NewTimer returns a timer that fires when the fake time reaches now+d.
func (f *Fake) NewTimer(d time.Duration) Timer {
	f.arming()
	t := &fakeTimer{f: f, c: make(chan time.Time, 1)}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armLocked(t, d)
	return t
}

// Sleep waits until the fake time has moved d, or ctx ends.
func (f *Fake) Sleep(ctx context.Context, d time.Duration) error { return sleep(ctx, f, d) }

// Advance moves the time forward by d and fires the timers that are due.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.setLocked(f.now.Add(d))
}

// Set moves the time to t (forward or back) and fires the timers that are due.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.setLocked(t)
}

// Timers returns the number of armed timers.
func (f *Fake) Timers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// BlockUntilContext waits until at least n timers are armed, or ctx ends.
func (f *Fake) BlockUntilContext(ctx context.Context, n int) error {
	f.mu.Lock()
	if len(f.timers) >= n {
		f.mu.Unlock()
		return nil
	}
	w := fakeWaiter{n: n, ch: make(chan struct{})}
	f.waiters = append(f.waiters, w)
	f.mu.Unlock()
	select {
	case <-w.ch:
		return nil
	case <-ctx.Done():
		f.mu.Lock()
		for i, x := range f.waiters {
			if x.ch == w.ch {
				f.waiters = append(f.waiters[:i], f.waiters[i+1:]...)
				break
			}
		}
		f.mu.Unlock()
		return ctx.Err()
	}
}

func (f *Fake) setLocked(t time.Time) {
	f.now = t
	kept := f.timers[:0]
	for _, tm := range f.timers {
		if !tm.when.After(t) {
			tm.active = false
			select {
			case tm.c <- t:
			default: // like time.Timer: an unread value is not doubled
			}
			continue
		}
		kept = append(kept, tm)
	}
	clear(f.timers[len(kept):])
	f.timers = kept
}

func (f *Fake) armLocked(t *fakeTimer, d time.Duration) {
	t.when = f.now.Add(d)
	if d <= 0 {
		t.active = false
		select {
		case t.c <- f.now:
		default:
		}
		return
	}
	t.active = true
	f.timers = append(f.timers, t)
	kept := f.waiters[:0]
	for _, w := range f.waiters {
		if len(f.timers) >= w.n {
			close(w.ch)
			continue
		}
		kept = append(kept, w)
	}
	f.waiters = kept
}

func (f *Fake) removeLocked(t *fakeTimer) bool {
	for i, x := range f.timers {
		if x == t {
			f.timers = append(f.timers[:i], f.timers[i+1:]...)
			return true
		}
	}
	return false
}

type fakeTimer struct {
	f      *Fake
	c      chan time.Time
	when   time.Time // guarded by f.mu
	active bool      // guarded by f.mu
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	t.active = false
	return t.disarmLocked()
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	t.f.arming()
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	was := t.disarmLocked()
	t.f.armLocked(t, d)
	return was
}

// disarmLocked removes t from the armed timers and discards a value that
// fired but was not received. Like time.Timer since Go 1.23, no stale value
// is received after Stop or Reset, and a timer whose value was still unread
// counts as active (Stop and Reset report true).
func (t *fakeTimer) disarmLocked() bool {
	was := t.f.removeLocked(t)
	select {
	case <-t.c:
		was = true
	default:
	}
	return was
}
