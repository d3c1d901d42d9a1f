package redlock_test

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/clock"
	"github.com/fencedlock/fencedlock/redlock"
)

// awaitN waits until n events match, at most until deadline.
func (r *eventLog) awaitN(t testing.TB, deadline time.Time, what string, n int, match func(event) bool) {
	t.Helper()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		r.mu.Lock()
		got := 0
		for _, e := range r.events {
			if match(e) {
				got++
			}
		}
		changed := r.changed
		r.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-changed:
		case <-timer.C:
			t.Fatalf("%d of %d %s events by the deadline; events: %v", got, n, what, r.all())
		}
	}
}

// isKindOf matches the events of one kind for one key.
func isKindOf(kind, key string) func(event) bool {
	return func(e event) bool { return e.kind == kind && e.key == key }
}

// TestWatchdogRetriesAfterNodeErrors: an extension that fails on node
// timeouts (a quorum of nodes frozen with SIGSTOP for a moment) says
// nothing about whether the hold is gone, so the watchdog tries again —
// halfway through the validity left beyond one try (watchdog.go) — and the
// hold survives once the nodes answer. Before, the first failed extension
// closed Done with two thirds of the validity left.
func TestWatchdogRetriesAfterNodeErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		nodes  int
		frozen int
	}{
		{"2 of 3 frozen", 3, 2},
		{"3 of 5 frozen", 5, 3},
		{"all 3 frozen", 3, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWatchedHold(t, tc.nodes)
			r, fake, ev, logs, c, nt, ttl, l, done := w.r, w.fake, w.ev, w.logs, w.c, w.nt, w.ttl, w.l, w.done
			ctx := t.Context()
			if err := fake.BlockUntilContext(ctx, 1); err != nil { // the scheduler waits
				t.Fatal(err)
			}
			for _, p := range r.procs[:tc.frozen] {
				if err := p.Pause(); err != nil {
					t.Fatal(err)
				}
			}
			resumed := false
			resume := func() {
				if resumed {
					return
				}
				resumed = true
				for _, p := range r.procs[:tc.frozen] {
					if err := p.Resume(); err != nil {
						t.Error(err)
					}
				}
			}
			t.Cleanup(resume)

			fake.Advance(ttl / 3)
			failedAt := fake.Now()
			left := l.Until().Sub(failedAt) // when the first extension goes out
			// The extension fails once the frozen nodes leave no quorum:
			// N-q+1 of them time out (each bounded by the node timeout).
			// It reports them as node errors unless its own bound passes
			// first (a machine that stalls the timeouts' delivery past it);
			// its log says it failed either way.
			logs.await(t, ttl, "extension failed")
			// A node that timed out is marked down, as many as leave a
			// quorum unmarked: its calls then fail at once until the
			// Client's probe, in real time, finds it up again.
			marks := min(tc.frozen, tc.nodes-c.Quorum())
			for deadline := time.Now().Add(20 * nt); ; {
				downs := 0
				for i := range tc.frozen {
					downs += logs.count("down " + strconv.Itoa(i))
				}
				if downs >= marks {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d of the frozen nodes marked down, want %d", downs, marks)
				}
				time.Sleep(time.Millisecond) // polling the Client's log, bounded
			}
			resume()
			// The retry must find the nodes as they are now, awake: every
			// call sent to them while frozen (the first extension's, the
			// probe's PING) has ended, none is marked down any more. A call
			// still out ends when its node runs again, on a loaded machine
			// well after another node's mark was lifted, and the retry's
			// call on its worker waits behind it.
			for deadline := time.Now().Add(20 * nt); ; {
				marked, out := 0, 0
				for i, rc := range r.clients[:tc.frozen] {
					if logs.count("down "+strconv.Itoa(i)) > logs.count("up "+strconv.Itoa(i)) {
						marked++
					}
					if st := rc.PoolStats(); st.TotalConns > st.IdleConns {
						out++
					}
				}
				if marked == 0 && out == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("after %v, %d resumed nodes still marked down, %d with calls out", 20*nt, marked, out)
				}
				time.Sleep(time.Millisecond) // polling the Client's log and the nodes' pools, bounded
			}
			// The retry: halfway through the validity left beyond a try.
			room := left - 2*nt
			fake.Advance(room / 2)
			ext := ev.await(t, time.Now().Add(ttl), "extended", func(e event) bool {
				return e.kind == "extended" || e.kind == "lost"
			})
			if ext.kind == "lost" {
				t.Fatalf("the hold was lost on extensions whose nodes only timed out, %v of validity left at the first", left)
			}
			if got, want := l.Until(), fake.Now().Add(ttl-ttl/100-2*time.Millisecond); !got.Equal(want) {
				t.Fatalf("Until after the retry %v, want %v (the retry's start + ttl - drift)", got, want)
			}
			select {
			case <-done:
				t.Fatal("Done closed although the retry extended the hold")
			default:
			}
			if n := r.holders(t, "k", l.Value()); n < c.Quorum() {
				t.Fatalf("the hold is on %d nodes after the retry, want a quorum", n)
			}
			// And the watchdog goes on at its period from there.
			fake.Advance(ttl / 3)
			ev.awaitN(t, time.Now().Add(ttl), "extended", 2, isKind("extended"))
		})
	}
}

// TestWatchdogLosesAHoldThatAQuorumDenies: when a quorum of nodes answers
// that the hold is not there (deleted, or another value took the key),
// Done closes on that one extension, with validity left: no retry.
func TestWatchdogLosesAHoldThatAQuorumDenies(t *testing.T) {
	for _, tc := range []struct {
		name string
		deny func(ctx context.Context, r *rig, n int)
	}{
		{"deleted on a quorum", func(ctx context.Context, r *rig, n int) {
			for _, rc := range r.clients[:n] {
				rc.Del(ctx, "k")
			}
		}},
		{"taken by another value on a quorum", func(ctx context.Context, r *rig, n int) {
			for _, rc := range r.clients[:n] {
				rc.Set(ctx, "k", "someone-else", time.Minute)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWatchedHold(t, 5)
			r, fake, ev, c, ttl, l, done := w.r, w.fake, w.ev, w.c, w.ttl, w.l, w.done
			ctx := t.Context()
			tc.deny(ctx, r, c.Quorum())
			if err := fake.BlockUntilContext(ctx, 1); err != nil {
				t.Fatal(err)
			}
			fake.Advance(ttl / 3)
			select {
			case <-done:
			case <-time.After(ttl): // a bound on a broken watchdog, not a synchronisation
				t.Fatal("Done not closed after a quorum denied the hold")
			}
			if left := l.TTL(); left <= 0 {
				t.Fatalf("Done closed with %v of validity left: at its expiry, not when the quorum denied it", left)
			}
			ev.await(t, time.Now().Add(ttl), "lost", isKindOf("lost", "k"))
			if n := ev.count(isKind("extended")); n != 0 {
				t.Fatalf("%d extensions reported for a denied hold", n)
			}
		})
	}
}

// TestScheduledHoldsCostNoGoroutine: Done and AutoExtend of N holds run on
// the Client's one scheduler: the goroutines do not grow with N (before,
// each Done and each watchdog started one). Done closes at the end of each
// validity, no earlier; every auto-extended hold is extended each period.
func TestScheduledHoldsCostNoGoroutine(t *testing.T) {
	const holds = 300
	for _, tc := range []struct {
		name string
		auto bool
	}{{"Done", false}, {"AutoExtend and Done", true}} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, 3)
			fake := clock.NewFake(epoch)
			ev := newEventLog()
			// Up to maxExtensions of the holds' extensions go out at once:
			// a node timeout of what as many acquisitions took one after
			// another is more than such a round needs (its calls share
			// pipelines), however loaded the machine.
			nt := max(roomyNodeTimeout(measureRTT(t, r.clients)), serialAcquisitions(t, r, holds))
			c := r.client(t, redlock.WithClock(fake), redlock.WithObserver(ev), redlock.WithNodeTimeout(nt))
			ctx := t.Context()
			ttl := 30 * nt
			var opts []redlock.LockOption
			if tc.auto {
				opts = append(opts, redlock.AutoExtend())
			}
			// One hold first: the per-node workers, go-redis's connections
			// and the scheduler exist before the count.
			first, err := c.TryLock(ctx, "first", ttl, opts...)
			if err != nil {
				t.Fatal(err)
			}
			_ = first.Done()
			before := runtime.NumGoroutine()
			locks := make([]*redlock.Lock, holds)
			dones := make([]<-chan struct{}, holds)
			for i := range locks {
				if locks[i], err = c.TryLock(ctx, fmt.Sprintf("k%d", i), ttl, opts...); err != nil {
					t.Fatal(err)
				}
				dones[i] = locks[i].Done()
			}
			grown := runtime.NumGoroutine() - before
			t.Logf("%d holds: %+d goroutines", holds, grown)
			// A goroutine per hold would add holds; the scheduler adds none
			// once it runs. What may come and go meanwhile (a call's
			// background part, a go-redis dial) is far below that.
			if grown >= holds/10 {
				t.Fatalf("%d holds added %d goroutines: they grow with the holds", holds, grown)
			}
			if tc.auto {
				for round := 1; round <= 3; round++ {
					if err := fake.BlockUntilContext(ctx, 1); err != nil {
						t.Fatal(err)
					}
					fake.Advance(ttl / 3)
					ev.awaitN(t, time.Now().Add(ttl), "extended", round*(holds+1), isKind("extended"))
				}
				for i, l := range locks {
					select {
					case <-dones[i]:
						t.Fatalf("hold %d ended while its watchdog extended it", i)
					default:
					}
					_ = l.Unlock(ctx)
				}
				_ = first.Unlock(ctx)
				for i := range locks {
					<-dones[i] // Unlock closed it
				}
				return
			}
			fake.Advance(first.TTL() - time.Millisecond)
			for i := range locks {
				select {
				case <-dones[i]:
					t.Fatalf("hold %d: Done closed before its validity ran out", i)
				default:
				}
			}
			fake.Advance(time.Millisecond + locks[holds-1].TTL())
			for i := range locks {
				select {
				case <-dones[i]:
				case <-time.After(ttl): // a bound on a broken scheduler, not a synchronisation
					t.Fatalf("hold %d: Done not closed when its validity ran out", i)
				}
			}
		})
	}
}

// serialAcquisitions is how long n acquisitions one after another take on
// r's nodes, each released before the next.
func serialAcquisitions(t *testing.T, r *rig, n int) time.Duration {
	t.Helper()
	c := r.client(t)
	defer c.Close()
	start := time.Now()
	for i := range n {
		l, err := c.TryLock(t.Context(), fmt.Sprintf("serial%d", i), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	took := time.Since(start)
	t.Logf("%d acquisitions one after another: %v", n, took)
	return took
}

// TestCloseStopsTheScheduler: Close ends every scheduled hold (Done
// closes) and nothing is extended after it, however far the clock moves.
func TestCloseStopsTheScheduler(t *testing.T) {
	r := newRig(t, 3)
	fake := clock.NewFake(epoch)
	ev := newEventLog()
	nt := roomyNodeTimeout(measureRTT(t, r.clients))
	c := r.client(t, redlock.WithClock(fake), redlock.WithObserver(ev), redlock.WithNodeTimeout(nt))
	ctx := t.Context()
	ttl := 30 * nt
	var dones []<-chan struct{}
	for _, key := range []string{"a", "b", "c"} {
		l, err := c.TryLock(ctx, key, ttl, redlock.AutoExtend())
		if err != nil {
			t.Fatal(err)
		}
		dones = append(dones, l.Done())
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for i, d := range dones {
		select {
		case <-d:
		default:
			t.Fatalf("hold %d: Done open after Close returned", i)
		}
	}
	fake.Advance(ttl / 3)
	fake.Advance(ttl)
	if n := ev.count(isKind("extended")); n != 0 {
		t.Fatalf("%d extensions after Close", n)
	}
	if n := fake.Timers(); n != 0 {
		t.Fatalf("%d timers armed after Close: the scheduler still waits", n)
	}
}

// TestWatchdogOutlivesAShorterExtend: an auto-extended hold that the
// caller extends with a shorter TTL than its own (less than a third of it)
// is still the watchdog's to keep ("extend the hold about every third of
// its TTL until Unlock"): its next extension comes a third of the new TTL
// in. (It stayed due a third of the original TTL after its last one, after
// the new Until: Done closed at Until with the nodes healthy.)
func TestWatchdogOutlivesAShorterExtend(t *testing.T) {
	r := newRig(t, 3)
	fake := clock.NewFake(epoch)
	ev := newEventLog()
	// Nodes healthy: a node timeout no loaded machine outlasts, so that only
	// the schedule can lose the hold.
	c := r.client(t, redlock.WithClock(fake), redlock.WithObserver(ev), redlock.WithNodeTimeout(2*time.Second))
	ctx := t.Context()
	ttl := time.Minute
	l, err := c.TryLock(ctx, "k", ttl, redlock.AutoExtend())
	if err != nil {
		t.Fatal(err)
	}
	done := l.Done()
	if err := l.Extend(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	// Step the clock a second at a time up to past the new Until. The
	// watchdog's next extension is due a third of the new TTL in: once the
	// clock passed that, wait (in real time) for it to land, since the
	// extension runs on a worker and the fake clock would outrun it.
	for i := 1; i <= 12; i++ {
		if err := fake.BlockUntilContext(ctx, 1); err != nil {
			t.Fatal(err)
		}
		fake.Advance(time.Second)
		if time.Duration(i)*time.Second == 4*time.Second {
			ev.awaitN(t, time.Now().Add(5*time.Second), "extended", 2, isKind("extended"))
		}
		select {
		case <-done:
			t.Fatalf("Done closed %v after a 10s Extend of a 1m AutoExtend hold on healthy nodes; events %v", time.Duration(i)*time.Second, ev.all())
		default:
		}
	}
}

// TestWatchdogKeepsAHoldUnderALargeDriftFactor: a drift factor is valid in
// [0, 1) (WithDriftFactor), and AutoExtend's watchdog extends "about every
// third of its TTL until Unlock". With a factor of 0.7 the validity is
// 0.3·ttl − 2ms, shorter than the third of the TTL at which the first
// extension is due (watchdog.go startWatchdog): every auto-extended hold
// ends at Until, on healthy nodes, without one extension tried.
func TestWatchdogKeepsAHoldUnderALargeDriftFactor(t *testing.T) {
	r := newRig(t, 3)
	fake := clock.NewFake(epoch)
	ev := newEventLog()
	// Nodes healthy: a node timeout no loaded machine outlasts, so that only
	// the schedule can lose the hold.
	c := r.client(t, redlock.WithClock(fake), redlock.WithObserver(ev), redlock.WithDriftFactor(0.7),
		redlock.WithNodeTimeout(2*time.Second))
	ctx := t.Context()
	const ttl = 10 * time.Second
	l, err := c.TryLock(ctx, "k", ttl, redlock.AutoExtend())
	if err != nil {
		t.Fatal(err)
	}
	done := l.Done()
	for i := range 10 { // to ttl/2 on the client clock, past the first Until
		// The scheduler waits on the clock; none waits once the hold ended.
		bctx, bcancel := context.WithTimeout(ctx, 5*time.Second)
		err := fake.BlockUntilContext(bctx, 1)
		bcancel()
		select {
		case <-done:
			t.Fatalf("Done closed by %v; events %v", time.Duration(i)*ttl/20, ev.all())
		default:
		}
		if err != nil {
			t.Fatal(err)
		}
		// Before a step that would cross Until, let an extension that fell
		// due land first (bounded: none may be on its way).
		for deadline := time.Now().Add(5 * time.Second); l.TTL() <= ttl/20 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond) // polling the hold, bounded
		}
		fake.Advance(ttl / 20)
		select {
		case <-done:
			t.Fatalf("Done closed %v into a %v AutoExtend hold with drift factor 0.7, nodes healthy; events %v",
				time.Duration(i+1)*ttl/20, ttl, ev.all())
		default:
		}
	}
}

// watchedHold is an auto-extended hold of "k", watched (Done), on n real
// nodes and a fake clock, with its Client's events and node transitions.
type watchedHold struct {
	r    *rig
	fake *clock.Fake
	ev   *eventLog
	logs *transitions
	c    *redlock.Client
	nt   time.Duration // the node timeout: roomy for the machine's round trips
	ttl  time.Duration
	l    *redlock.Lock
	done <-chan struct{}
}

func newWatchedHold(t *testing.T, n int) *watchedHold {
	t.Helper()
	w := &watchedHold{r: newRig(t, n), fake: clock.NewFake(epoch), ev: newEventLog(), logs: newTransitions()}
	w.nt = roomyNodeTimeout(measureRTT(t, w.r.clients))
	w.c = w.r.client(t, redlock.WithClock(w.fake), redlock.WithObserver(w.ev), redlock.WithNodeTimeout(w.nt),
		redlock.WithLogger(slog.New(w.logs)))
	// A validity long enough for a retry after a failed try: the watchdog's
	// first extension a third of the way in, its retry halfway through what
	// is left beyond two node timeouts.
	w.ttl = 30 * w.nt
	var err error
	if w.l, err = w.c.TryLock(t.Context(), "k", w.ttl, redlock.AutoExtend()); err != nil {
		t.Fatal(err)
	}
	w.r.settled(t, "k", w.l.Value())
	w.done = w.l.Done()
	return w
}

// TestSchedulerWakesWhenTheClockMovedBeforeItsTimerWasArmed: the
// scheduler re-arms its timer whenever the head of its heap changes. When
// the clock moves between its reading and the arming, the hold due in that
// span is still handled at once. (A timer armed for the wait measured from
// the stale reading fired that far past the due time: a test that advanced
// the Fake once saw no extension, under load, as the window widened.)
func TestSchedulerWakesWhenTheClockMovedBeforeItsTimerWasArmed(t *testing.T) {
	r := newRig(t, 3)
	clk := clock.NewFake(epoch)
	ev := newEventLog()
	nt := roomyNodeTimeout(measureRTT(t, r.clients))
	c := r.client(t, redlock.WithClock(clk), redlock.WithObserver(ev), redlock.WithNodeTimeout(nt))
	ctx := t.Context()
	ttl := 30 * nt
	l, err := c.TryLock(ctx, "k", ttl, redlock.AutoExtend())
	if err != nil {
		t.Fatal(err)
	}
	if err := clk.BlockUntilContext(ctx, 1); err != nil { // armed for k's extension
		t.Fatal(err)
	}
	// A hold due earlier (a shorter TTL) makes the scheduler re-arm; the
	// clock moves past k's extension, and short's validity, just before it
	// does.
	moved := make(chan struct{})
	clk.BeforeArm(func() {
		clk.BeforeArm(nil)
		clk.Advance(ttl / 2)
		close(moved)
	})
	short, err := c.TryLock(ctx, "short", ttl/3, redlock.AutoExtend())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = short.Unlock(ctx) }()
	select {
	case <-moved:
	case <-time.After(20 * nt): // a bound on a broken scheduler, not a synchronisation
		t.Fatal("the scheduler armed no timer after the new head: the test shows nothing")
	}
	// No further Advance: what is due now must be handled now.
	ev.await(t, time.Now().Add(20*nt), "extended", isKindOf("extended", "k"))
	if got := l.Until(); !got.After(epoch.Add(ttl / 2)) {
		t.Fatalf("k's Until %v: not extended from the clock's time %v", got, clk.Now())
	}
}

// baseArms is a Fake that counts the timers armed on it for an instant and
// TestSchedulerOnASlowSkewedClockEndsAtUntil: on a Skewed clock (rate 0.7)
// over a Fake, whose reading is rounded from its base's, a watched hold
// ends once the skewed clock passes its Until and not before, and the
// scheduler waits on one armed timer meanwhile: it does not re-arm for an
// instant its clock reads a nanosecond short of, again and again (it did,
// when a Skewed clock armed timers for the instant converted to base time).
func TestSchedulerOnASlowSkewedClockEndsAtUntil(t *testing.T) {
	r := newRig(t, 3)
	nt := roomyNodeTimeout(measureRTT(t, r.clients))
	base := clock.NewFake(epoch)
	var arms atomic.Int64 // the timers armed on base
	base.BeforeArm(func() { arms.Add(1) })
	clk := clock.NewSkewed(base, 0, 0.7)
	c := r.client(t, redlock.WithClock(clk), redlock.WithNodeTimeout(nt))
	ctx := t.Context()
	for i := range 50 { // validities of many lengths, each a different rounding
		ttl := 30*nt + time.Duration(i)*time.Millisecond + time.Duration(i)*time.Nanosecond*7
		l, err := c.TryLock(ctx, fmt.Sprint("k", i), ttl)
		if err != nil {
			t.Fatal(err)
		}
		done := l.Done()
		if err := base.BlockUntilContext(ctx, 1); err != nil {
			t.Fatal(err)
		}
		// Step the base to just short of Until on the skewed clock, then on.
		for clk.Now().Add(time.Millisecond).Before(l.Until()) {
			base.Advance(time.Millisecond / 2)
		}
		before := arms.Load()
		select {
		case <-done:
			t.Fatalf("hold %d ended %v before its Until", i, l.Until().Sub(clk.Now()))
		default:
		}
		for !clk.Now().After(l.Until()) {
			base.Advance(time.Microsecond)
		}
		select {
		case <-done:
		case <-time.After(20 * nt): // a bound on a broken scheduler, not a synchronisation
			t.Fatalf("hold %d: the clock is past Until and the hold has not ended", i)
		}
		if n := arms.Load() - before; n > 100 {
			t.Fatalf("hold %d: %d timers armed around its Until: the scheduler spins", i, n)
		}
		_ = l.Unlock(ctx)
	}
}

// aheadClock is a user's Clock written against the Clock interface: a Fake
// embedded for its timers, read off ahead (a client whose clock is fast
// by off). It overrides every Clock method that reads the time; it knows
// nothing of NewTimerAt, which the embedded Fake brings along.
type aheadClock struct {
	*clock.Fake
	off time.Duration
}

func (a aheadClock) Now() time.Time                  { return a.Fake.Now().Add(a.off) }
func (a aheadClock) Since(t time.Time) time.Duration { return a.Now().Sub(t) }
func (a aheadClock) NewTimer(d time.Duration) clock.Timer {
	return a.Fake.NewTimer(d)
}
func (a aheadClock) Sleep(ctx context.Context, d time.Duration) error { return a.Fake.Sleep(ctx, d) }

// TestSchedulerOnAClockThatEmbedsAFake: a Clock that embeds a Fake and
// reads the time its own way is a Clock, not an AtClock of its own time,
// yet the Fake's NewTimerAt is promoted onto it. A watched hold must end
// when this clock passes its Until, as it did when the scheduler armed
// timers through NewTimer.
func TestSchedulerOnAClockThatEmbedsAFake(t *testing.T) {
	r := newRig(t, 3)
	nt := roomyNodeTimeout(measureRTT(t, r.clients))
	f := clock.NewFake(epoch)
	clk := aheadClock{Fake: f, off: time.Hour}
	c := r.client(t, redlock.WithClock(clk), redlock.WithNodeTimeout(nt))
	ctx := t.Context()
	ttl := 30 * nt
	l, err := c.TryLock(ctx, "k", ttl)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Unlock(ctx) }()
	_ = l.Done() // watched: the scheduler ends the hold at Until
	if err := f.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	f.Advance(l.Until().Sub(clk.Now()))
	select {
	case <-l.Done():
	case <-time.After(20 * nt): // a bound on a broken scheduler, not a synchronisation
		t.Fatalf("the clock reads %v, past Until %v, and the hold has not ended", clk.Now(), l.Until())
	}
}
