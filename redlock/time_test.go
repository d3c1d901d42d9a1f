package redlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/clock"
	"github.com/fencedlock/fencedlock/redlock"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestValidity(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ttl   time.Duration
		drift float64
		want  time.Duration // Until - start
	}{
		{"default drift", 10 * time.Second, 0, 10*time.Second - 100*time.Millisecond - 2*time.Millisecond},
		{"5% drift", time.Second, 0.05, time.Second - 50*time.Millisecond - 2*time.Millisecond},
		{"short ttl", 10 * time.Millisecond, 0, 10*time.Millisecond - 100*time.Microsecond - 2*time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, 3)
			fake := clock.NewFake(epoch)
			opts := []redlock.Option{redlock.WithClock(fake), redlock.WithNodeTimeout(time.Second)}
			if tc.drift > 0 {
				opts = append(opts, redlock.WithDriftFactor(tc.drift))
			}
			c := r.client(t, opts...)
			l, err := c.TryLock(t.Context(), "k", tc.ttl)
			if err != nil {
				t.Fatal(err)
			}
			if got := l.Until().Sub(epoch); got != tc.want {
				t.Fatalf("validity %v, want %v", got, tc.want)
			}
			if got := l.TTL(); got != tc.want {
				t.Fatalf("TTL() %v, want %v", got, tc.want)
			}
		})
	}
}

// advanceOnScript moves the fake clock by d whenever an acquire script
// returns on any node: the attempt took d, as far as the client can tell.
func advanceOnScript(r *rig, fake *clock.Fake, d time.Duration) {
	for _, rc := range r.clients {
		rc.AddHook(afterScript(func() { fake.Advance(d) }))
	}
}

func TestNoExpiredLockIsReturned(t *testing.T) {
	r := newRig(t, 3)
	fake := clock.NewFake(epoch)
	// Each node's answer takes 400ms of the client's time: the quorum (2)
	// is in at 800ms, past the 691ms of validity a 700ms ttl leaves.
	advanceOnScript(r, fake, 400*time.Millisecond)
	c := r.client(t, redlock.WithClock(fake), redlock.WithNodeTimeout(time.Second))
	l, err := c.TryLock(t.Context(), "k", 700*time.Millisecond)
	if !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("TryLock whose quorum came after the validity: %v, lock until %v", err, l)
	}
	_ = c.Close()
	if n := r.anyKey(t, "k"); n != 0 {
		t.Fatalf("expired attempt left the key on %d nodes", n)
	}
}

func TestDoneClosesOnExpiry(t *testing.T) {
	r := newRig(t, 3)
	fake := clock.NewFake(epoch)
	c := r.client(t, redlock.WithClock(fake))
	l, err := c.TryLock(t.Context(), "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	done := l.Done()
	fake.Advance(l.TTL() - time.Millisecond)
	select {
	case <-done:
		t.Fatal("Done closed before the validity ran out")
	default:
	}
	fake.Advance(time.Millisecond)
	select {
	case <-done:
	case <-t.Context().Done():
		t.Fatal("Done not closed when the validity ran out")
	}
}

type events struct {
	redlock.NopObserver
	extended chan uint64
	lost     chan uint64
}

func (e events) Extended(_ string, tok uint64) { e.extended <- tok }
func (e events) Lost(_ string, tok uint64)     { e.lost <- tok }

func TestWatchdogExtendsThenSignalsLoss(t *testing.T) {
	r := newRig(t, 3)
	fake := clock.NewFake(epoch)
	ev := events{extended: make(chan uint64, 10), lost: make(chan uint64, 10)}
	const nt = time.Second
	c := r.client(t, redlock.WithClock(fake), redlock.WithObserver(ev), redlock.WithNodeTimeout(nt))
	// Every wait below is for one extension, which ends within its node
	// timeout: a bound many times that fails the test rather than hang it.
	ctx, cancel := context.WithTimeout(t.Context(), 20*nt)
	defer cancel()
	const ttl = 3 * time.Second
	l, err := c.TryLock(ctx, "k", ttl, redlock.AutoExtend())
	if err != nil {
		t.Fatal(err)
	}
	r.settled(t, "k", l.Value())
	done := l.Done() // the same scheduler, and its one timer, as the watchdog
	for round := range 3 {
		if err := fake.BlockUntilContext(ctx, 1); err != nil { // the scheduler waits
			t.Fatal(err)
		}
		fake.Advance(ttl / 3)
		select {
		case <-ev.extended:
		case <-ctx.Done():
			t.Fatalf("round %d: no extension", round)
		}
		if got, want := l.Until(), fake.Now().Add(ttl-ttl/100-2*time.Millisecond); got != want {
			t.Fatalf("round %d: Until %v, want %v", round, got, want)
		}
	}
	// 3 rounds of ttl/3 = one whole ttl: without the watchdog it would be gone.
	select {
	case <-done:
		t.Fatal("Done closed while the watchdog kept the lock")
	default:
	}
	// The key disappears from a majority: the next extension fails.
	for _, rc := range r.clients[:2] {
		rc.Del(ctx, "k")
	}
	if err := fake.BlockUntilContext(ctx, 1); err != nil { // the scheduler waits
		t.Fatal(err)
	}
	fake.Advance(ttl / 3)
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("Done not closed after a failed extension")
	}
	if tok := <-ev.lost; tok != l.Token() {
		t.Fatalf("lost event for token %d, want %d", tok, l.Token())
	}
	if err := l.Extend(ctx, ttl); !errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("Extend after loss: %v", err)
	}
}

// TestDoCancelsWhenMajorityDies: with a majority of nodes killed, fn's ctx
// ends when the hold's validity runs out, and no later. Dead nodes only
// fail (they refuse connections): no quorum says the hold is gone, so the
// watchdog keeps trying while a try could land (watchdog.go), rather than
// giving the hold up at its first failed extension, a third of the TTL in.
func TestDoCancelsWhenMajorityDies(t *testing.T) {
	r := newRig(t, 5)
	nt := roomyNodeTimeout(measureRTT(t, r.clients))
	ttl := 30 * nt
	c := r.client(t, redlock.WithNodeTimeout(nt))
	ctx := t.Context()
	var (
		token             uint64
		killed, cancelled time.Time
		left              time.Duration // validity left when fn's ctx ended
	)
	err := c.Do(ctx, "task", ttl, func(fctx context.Context, l *redlock.Lock) error {
		token = l.Token()
		for _, p := range r.procs[:3] {
			if err := p.Kill(); err != nil {
				return err
			}
		}
		killed = time.Now()
		limit := time.NewTimer(ttl)
		defer limit.Stop()
		select {
		case <-fctx.Done():
			cancelled, left = time.Now(), l.TTL()
			return fctx.Err()
		case <-limit.C:
			return errors.New("fn's ctx was not cancelled within a ttl of the kill")
		}
	})
	if !errors.Is(err, redlock.ErrLockLost) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Do: %v, want ErrLockLost and fn's context.Canceled", err)
	}
	if token == 0 {
		t.Fatal("fn never ran")
	}
	t.Logf("ttl %v: fn's ctx ended %v after the kill, with %v of validity left", ttl, cancelled.Sub(killed), left)
	if left > 0 {
		t.Errorf("fn's ctx ended with %v of validity left: the hold was given up on node errors, which do not say it is gone", left)
	}
	// The scheduler's wake-up at Until, on a loaded machine: the bound the
	// watchdog's own period had before, four node timeouts.
	if late := -left; late > 4*nt {
		t.Errorf("fn's ctx ended %v after the validity ran out, want within 4 node timeouts (%v)", late, 4*nt)
	}
}

func TestDoRunsAndUnlocks(t *testing.T) {
	r := newRig(t, 3)
	c := r.client(t)
	ctx := t.Context()
	ran := false
	fnErr := errors.New("boom")
	err := c.Do(ctx, "task", time.Second, func(ctx context.Context, l *redlock.Lock) error {
		ran = l.Token() > 0
		return fnErr
	})
	if !errors.Is(err, fnErr) || !ran {
		t.Fatalf("Do: %v (ran=%v), want fn's error", err, ran)
	}
	_ = c.Close()
	if n := r.anyKey(t, "task"); n != 0 {
		t.Fatalf("Do left the key on %d nodes", n)
	}
}
