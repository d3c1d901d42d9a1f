package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fencedlock/fencedlock/clock"
	"github.com/fencedlock/fencedlock/redlock"
)

// TestLeaseDeadline: a lease's deadline is the wall clock at the call plus
// the hold's validity left on the Client's clock, less the margin. The fake
// clock stands still, so the validity left is exact and the bound is the
// wall-clock span of the call itself; a margin at least the validity left
// gives a context already done, a negative one an invalid-argument cause.
func TestLeaseDeadline(t *testing.T) {
	r := newRig(t, 3)
	fake := clock.NewFake(epoch)
	c := r.client(t, redlock.WithClock(fake))
	const ttl = 10 * time.Second
	l, err := c.TryLock(t.Context(), "lease-deadline", ttl)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Unlock(context.WithoutCancel(t.Context())) })
	left := l.TTL()
	if left <= 0 || left > ttl {
		t.Fatalf("TTL %v, want in (0, %v]", left, ttl)
	}
	for _, tc := range []struct {
		name    string
		margin  time.Duration
		expired bool
	}{
		{"no margin", 0, false},
		{"a quarter", left / 4, false},
		{"all but a millisecond", left - time.Millisecond, false},
		{"all of it", left, true},
		{"more than all", 2 * left, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := time.Now()
			ctx, cancel := l.Lease(t.Context(), tc.margin)
			defer cancel()
			after := time.Now()
			deadline, ok := ctx.Deadline()
			if !ok {
				t.Fatal("no deadline")
			}
			lo, hi := before.Add(left-tc.margin), after.Add(left-tc.margin)
			if deadline.Before(lo) || deadline.After(hi) {
				t.Fatalf("deadline %v, want in [%v, %v] (now + %v − %v)", deadline, lo, hi, left, tc.margin)
			}
			if tc.expired != (ctx.Err() != nil) {
				t.Fatalf("expired: %v, want %v", ctx.Err(), tc.expired)
			}
			if tc.expired && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
				t.Fatalf("err %v, want DeadlineExceeded", ctx.Err())
			}
			if got, ok := redlock.LockFromContext(ctx); !ok || got != l {
				t.Fatalf("LockFromContext: %p, %v; want the hold", got, ok)
			}
		})
	}
	t.Run("negative margin", func(t *testing.T) {
		ctx, cancel := l.Lease(t.Context(), -time.Second)
		defer cancel()
		if !errors.Is(context.Cause(ctx), redlock.ErrInvalidArgument) {
			t.Fatalf("cause %v, want ErrInvalidArgument", context.Cause(ctx))
		}
	})
	t.Run("a later Extend moves new leases only", func(t *testing.T) {
		old, cancelOld := l.Lease(t.Context(), 0)
		defer cancelOld()
		oldDeadline, _ := old.Deadline()
		fake.Advance(time.Second)
		if err := l.Extend(t.Context(), 2*ttl); err != nil {
			t.Fatal(err)
		}
		if d, _ := old.Deadline(); !d.Equal(oldDeadline) {
			t.Fatalf("derived deadline moved from %v to %v", oldDeadline, d)
		}
		left := l.TTL() // on the fake clock: 2*ttl less the drift allowance
		if left <= ttl {
			t.Fatalf("TTL after Extend %v, want > %v", left, ttl)
		}
		before := time.Now()
		ctx, cancel := l.Lease(t.Context(), 0)
		defer cancel()
		after := time.Now()
		d, _ := ctx.Deadline()
		if d.Before(before.Add(left)) || d.After(after.Add(left)) {
			t.Fatalf("deadline %v, want in [%v, %v]", d, before.Add(left), after.Add(left))
		}
	})
}

// TestLeaseEndsWithTheHold: a lease's context is cancelled when the hold
// ends, long before its deadline, with a cause that says how: Unlock
// (Canceled), a quorum that says the hold is gone (ErrLockLost), or a
// majority of nodes killed until the validity ran out (ErrLockLost). A
// lease taken after the end is born cancelled. Leases given and cancelled
// leave no goroutine behind.
func TestLeaseEndsWithTheHold(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	for _, tc := range []struct {
		name  string
		end   func(t *testing.T, r *rig, fake *clock.Fake, l *redlock.Lock)
		cause error
	}{
		{"unlocked", func(t *testing.T, _ *rig, _ *clock.Fake, l *redlock.Lock) {
			if err := l.Unlock(t.Context()); err != nil {
				t.Fatal(err)
			}
		}, context.Canceled},
		{"taken over", func(t *testing.T, r *rig, _ *clock.Fake, l *redlock.Lock) {
			for _, rc := range r.clients { // another holder, as after an expiry
				if err := rc.Set(t.Context(), l.Key(), "someone-else", time.Minute).Err(); err != nil {
					t.Fatal(err)
				}
			}
			if err := l.Extend(t.Context(), time.Minute); !errors.Is(err, redlock.ErrLockLost) {
				t.Fatalf("Extend: %v, want ErrLockLost", err)
			}
		}, redlock.ErrLockLost},
		{"majority killed", func(t *testing.T, r *rig, fake *clock.Fake, l *redlock.Lock) {
			for _, p := range r.procs[:2] {
				if err := p.Kill(); err != nil {
					t.Fatal(err)
				}
			}
			if err := fake.BlockUntilContext(t.Context(), 1); err != nil { // the scheduler waits for Until
				t.Fatal(err)
			}
			fake.Advance(l.TTL())
		}, redlock.ErrLockLost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, 3)
			fake := clock.NewFake(epoch)
			c := r.client(t, redlock.WithClock(fake))
			l, err := c.TryLock(t.Context(), "lease-end", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Unlock(context.WithoutCancel(t.Context())) })
			// Leases given and cancelled before the end: forgotten.
			for range 100 {
				_, cancel := l.Lease(t.Context(), time.Second)
				cancel()
			}
			ctx, cancel := l.Lease(t.Context(), time.Second)
			defer cancel()
			if ctx.Err() != nil {
				t.Fatalf("lease ended at once: %v", ctx.Err())
			}
			tc.end(t, r, fake, l)
			// Unlock and a refused Extend end the hold before they return;
			// the scheduler ends it within a node timeout of Until.
			bound := time.NewTimer(max(250*time.Millisecond, 100*r.rtt))
			defer bound.Stop()
			select {
			case <-ctx.Done():
			case <-bound.C:
				t.Fatal("the lease outlived the hold")
			}
			if !errors.Is(context.Cause(ctx), tc.cause) {
				t.Fatalf("cause %v, want %v", context.Cause(ctx), tc.cause)
			}
			late, cancelLate := l.Lease(t.Context(), 0)
			defer cancelLate()
			if !errors.Is(context.Cause(late), tc.cause) {
				t.Fatalf("a lease after the end: cause %v, want %v", context.Cause(late), tc.cause)
			}
		})
	}
}

// TestLeaseFromDo: Do's fn finds its hold in its ctx, and a lease derived
// from fn's ctx ends with fn's when the lock is lost.
func TestLeaseFromDo(t *testing.T) {
	r := newRig(t, 3)
	c := r.client(t)
	err := c.Do(t.Context(), "lease-do", time.Minute, func(ctx context.Context, l *redlock.Lock) error {
		got, ok := redlock.LockFromContext(ctx)
		if !ok || got != l {
			return errors.New("fn's ctx does not carry its hold")
		}
		lease, cancel := got.Lease(ctx, time.Second)
		defer cancel()
		if d, ok := lease.Deadline(); !ok || time.Until(d) > time.Minute {
			return errors.New("lease deadline missing or past the TTL")
		}
		for _, rc := range r.clients {
			if err := rc.Set(ctx, "lease-do", "someone-else", time.Minute).Err(); err != nil {
				return err
			}
		}
		if err := l.Extend(ctx, time.Minute); !errors.Is(err, redlock.ErrLockLost) {
			return err
		}
		// The refused Extend ended the hold before it returned.
		if !errors.Is(context.Cause(lease), redlock.ErrLockLost) {
			return context.Cause(lease)
		}
		return nil
	})
	if !errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("Do: %v, want ErrLockLost", err)
	}
	if _, ok := redlock.LockFromContext(t.Context()); ok {
		t.Fatal("a hold found in a ctx no Do made")
	}
}

// TestLeaseHugeMargin: a margin near the int64 limit against a validity
// already run out (on the Client's clock) must not wrap around into a
// deadline centuries away: the lease is done at once and its deadline is
// not after the call. Both before the scheduler noticed the end (nobody
// watched the hold until Lease asked) and after it.
func TestLeaseHugeMargin(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ended bool
	}{{"validity ran out, not yet ended", false}, {"hold ended", true}} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, 3)
			fake := clock.NewFake(epoch)
			c := r.client(t, redlock.WithClock(fake))
			const ttl = 10 * time.Second
			l, err := c.TryLock(t.Context(), "lease-huge-margin", ttl)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Unlock(context.WithoutCancel(t.Context())) })
			if tc.ended {
				if err := l.Unlock(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			fake.Advance(2 * ttl) // Until is a validity in the past
			ctx, cancel := l.Lease(t.Context(), math.MaxInt64)
			defer cancel()
			after := time.Now()
			if ctx.Err() == nil {
				t.Error("lease with a margin past the validity is not done")
			}
			if d, ok := ctx.Deadline(); !ok || d.After(after) {
				t.Errorf("deadline %v (in %v), want not after the call", d, time.Until(d))
			}
		})
	}
}

// TestLeaseFromDoLostCause: every lease derived from Do's fn ctx has the
// cause ErrLockLost when the hold is lost, not the Canceled of fn's ctx,
// which Do's watcher cancels as soon as Done closes — possibly before
// the hold's end has cancelled the leases with their own cause.
func TestLeaseFromDoLostCause(t *testing.T) {
	r := newRig(t, 3)
	c := r.client(t)
	const n = 5000 // leases: the end cancels them one by one, a window for the watcher
	var causes map[string]int
	err := c.Do(t.Context(), "lease-do-cause", time.Minute, func(ctx context.Context, l *redlock.Lock) error {
		leases := make([]context.Context, 0, n)
		for range n {
			lease, cancel := l.Lease(ctx, time.Second)
			defer cancel()
			leases = append(leases, lease)
		}
		for _, rc := range r.clients {
			if err := rc.Set(ctx, "lease-do-cause", "someone-else", time.Minute).Err(); err != nil {
				return err
			}
		}
		if err := l.Extend(ctx, time.Minute); !errors.Is(err, redlock.ErrLockLost) {
			return err
		}
		causes = map[string]int{}
		for _, lease := range leases {
			causes[fmt.Sprint(context.Cause(lease))]++
		}
		return nil
	})
	if !errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("Do: %v, want ErrLockLost", err)
	}
	if causes[redlock.ErrLockLost.Error()] != n {
		t.Fatalf("lease causes %v, want all %d %v", causes, n, redlock.ErrLockLost)
	}
}

// TestLeaseUnlockFoundItGone: when Unlock finds the hold already gone (it
// returns ErrLockLost), the leases open then and those taken after must
// agree on how the hold ended: one hold, one cause.
func TestLeaseUnlockFoundItGone(t *testing.T) {
	r := newRig(t, 3)
	c := r.client(t)
	l, err := c.TryLock(t.Context(), "lease-unlock-gone", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	before, cancelBefore := l.Lease(t.Context(), 0)
	defer cancelBefore()
	for _, rc := range r.clients { // another holder, as after an expiry
		if err := rc.Set(t.Context(), l.Key(), "someone-else", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Unlock(t.Context()); !errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("Unlock: %v, want ErrLockLost", err)
	}
	after, cancelAfter := l.Lease(t.Context(), 0)
	defer cancelAfter()
	if b, a := context.Cause(before), context.Cause(after); b != a {
		t.Fatalf("a lease open at Unlock ended with %v, one taken after with %v", b, a)
	}
}

// leaseObserver calls Lease on the hold in hold from its Lost hook.
type leaseObserver struct {
	redlock.NopObserver
	hold atomic.Pointer[redlock.Lock]
	lost atomic.Pointer[context.Context]
}

func (o *leaseObserver) Lost(string, uint64) {
	if l := o.hold.Load(); l != nil {
		ctx, cancel := l.Lease(context.Background(), 0)
		cancel()
		o.lost.Store(&ctx)
	}
}

// TestLeaseNoDeadlock: the ways of calling into a lease from where the
// hold's own machinery runs return, each bounded by a generous multiple
// of the rig's round trip.
func TestLeaseNoDeadlock(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, r *rig, o *leaseObserver, l *redlock.Lock)
	}{
		{"CancelFunc twice", func(t *testing.T, _ *rig, _ *leaseObserver, l *redlock.Lock) {
			_, cancel := l.Lease(t.Context(), 0)
			cancel()
			cancel()
		}},
		{"cancel from AfterFunc at Unlock", func(t *testing.T, _ *rig, _ *leaseObserver, l *redlock.Lock) {
			ctx, cancel := l.Lease(t.Context(), 0)
			ran := make(chan struct{})
			context.AfterFunc(ctx, func() { cancel(); close(ran) })
			if err := l.Unlock(t.Context()); err != nil {
				t.Error(err)
			}
			<-ran
		}},
		{"Lease from the Lost hook", func(t *testing.T, r *rig, o *leaseObserver, l *redlock.Lock) {
			o.hold.Store(l)
			for _, rc := range r.clients {
				if err := rc.Set(t.Context(), l.Key(), "someone-else", time.Minute).Err(); err != nil {
					t.Error(err)
				}
			}
			if err := l.Extend(t.Context(), time.Minute); !errors.Is(err, redlock.ErrLockLost) {
				t.Errorf("Extend: %v, want ErrLockLost", err)
			}
			if p := o.lost.Load(); p == nil || !errors.Is(context.Cause(*p), redlock.ErrLockLost) {
				t.Error("the Lost hook's lease is missing or not ErrLockLost")
			}
		}},
		{"Lease racing Unlock", func(t *testing.T, _ *rig, _ *leaseObserver, l *redlock.Lock) {
			const n = 8
			var wg sync.WaitGroup
			leases := make(chan context.Context, n*200)
			for range n {
				wg.Go(func() {
					for range 200 {
						ctx, cancel := l.Lease(t.Context(), 0)
						defer cancel()
						leases <- ctx
					}
				})
			}
			if err := l.Unlock(t.Context()); err != nil {
				t.Error(err)
			}
			wg.Wait()
			close(leases)
			for ctx := range leases {
				if ctx.Err() == nil {
					t.Error("a lease outlived the hold")
					return
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, 3)
			o := &leaseObserver{}
			c := r.client(t, redlock.WithObserver(o))
			l, err := c.TryLock(t.Context(), "lease-deadlock", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Unlock(context.WithoutCancel(t.Context())) })
			done := make(chan struct{})
			go func() { defer close(done); tc.run(t, r, o, l) }()
			bound := time.NewTimer(max(5*time.Second, 1000*r.rtt))
			defer bound.Stop()
			select {
			case <-done:
			case <-bound.C:
				t.Fatal("deadlocked")
			}
		})
	}
}

// TestLeaseEndsWithClose: Close ends every hold, and so their leases,
// with ErrLockLost, before it returns.
func TestLeaseEndsWithClose(t *testing.T) {
	r := newRig(t, 3)
	c := r.client(t)
	l, err := c.TryLock(t.Context(), "lease-close", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := l.Lease(t.Context(), 0)
	defer cancel()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(context.Cause(ctx), redlock.ErrLockLost) {
		t.Fatalf("cause after Close: %v, want ErrLockLost", context.Cause(ctx))
	}
}

// TestLeaseSkewedClock: a Client's clock set an hour off the wall clock
// does not move a lease's deadline by that hour: the validity left is a
// span on the Client's clock, added to the wall clock's now.
func TestLeaseSkewedClock(t *testing.T) {
	for _, offset := range []time.Duration{time.Hour, -time.Hour} {
		t.Run(offset.String(), func(t *testing.T) {
			r := newRig(t, 3)
			c := r.client(t, redlock.WithClock(clock.NewSkewed(clock.Real(), offset, 1)))
			const ttl = time.Minute
			l, err := c.TryLock(t.Context(), "lease-skewed", ttl)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Unlock(context.WithoutCancel(t.Context())) })
			before := time.Now()
			ctx, cancel := l.Lease(t.Context(), 0)
			defer cancel()
			d, ok := ctx.Deadline()
			if !ok || ctx.Err() != nil {
				t.Fatalf("deadline %v (%v), err %v; want a live lease", d, ok, ctx.Err())
			}
			if left := d.Sub(before); left <= 0 || left > ttl {
				t.Fatalf("deadline %v after the call, want in (0, %v]", left, ttl)
			}
		})
	}
}
