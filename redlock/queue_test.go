package redlock_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/clock"
	"github.com/fencedlock/fencedlock/redlock"
)

// Waiters for one key in one process queue up first come first served, and
// only the head of the queue is on the wire: a release wakes the head, and
// the queue moves in arrival order; a waiter behind the head never asks the
// nodes (its head is ahead of it there), counts each backoff of its
// strategy as a refused try, and tries at once when it becomes the head.
// These tests queue several Lock calls of one Client behind a holder, each
// only once the one before is known to be queued, so the arrival order is
// the order they were started.

// goid is the calling goroutine's id, as runtime.Stack names it.
func goid() string {
	var buf [64]byte
	s := strings.TrimPrefix(string(buf[:runtime.Stack(buf[:], false)]), "goroutine ")
	return s[:strings.IndexByte(s, ' ')]
}

// parkedInLock reports whether goroutine id is blocked, on a channel or a
// condition, inside a Client.Lock call: for a Lock behind other waiters of
// its process, that is waiting its turn. (A call on the wire would be in IO
// wait or running.)
func parkedInLock(id string) bool {
	buf := make([]byte, 64<<10)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	prefix := "goroutine " + id + " ["
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if !strings.HasPrefix(g, prefix) {
			continue
		}
		state, _, _ := strings.Cut(g[len(prefix):], "]")
		parked := false
		for _, s := range []string{"select", "chan receive", "sync.Cond.Wait"} {
			parked = parked || strings.HasPrefix(state, s)
		}
		return parked && strings.Contains(g, "redlock.(*Client).Lock(")
	}
	return false
}

type waitResult struct {
	k        int
	token    uint64 // of the hold, when Lock succeeded
	err      error  // Lock's, or else Unlock's
	returned time.Time
}

// queueWaiters starts one Lock of key on c per ctx, in order, each once the
// one before is queued. A waiter that gets the lock unlocks it at once.
func queueWaiters(t *testing.T, r *rig, c *redlock.Client, key string, ctxs []context.Context, deadline time.Time) <-chan waitResult {
	t.Helper()
	results := make(chan waitResult, len(ctxs))
	for k, ctx := range ctxs {
		ids := make(chan string, 1)
		go func() {
			ids <- goid()
			l, err := c.Lock(ctx, key, time.Minute)
			res := waitResult{k: k, err: err, returned: time.Now()}
			if err == nil {
				res.token = l.Token()
				res.err = l.Unlock(context.WithoutCancel(ctx))
			}
			results <- res
		}()
		id := <-ids
		if k == 0 {
			waitForSubscriber(t, r, key) // the head listens for releases once queued
		}
		eventually(t, deadline, fmt.Sprintf("waiter %d queued", k), func() bool { return parkedInLock(id) })
	}
	return results
}

// collect receives n results, failing the test at deadline.
func collect(t *testing.T, results <-chan waitResult, n int, deadline time.Time) []waitResult {
	t.Helper()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	var got []waitResult
	for len(got) < n {
		select {
		case res := <-results:
			got = append(got, res)
		case <-timer.C:
			t.Fatalf("%d of %d waiters returned by the deadline: %+v", len(got), n, got)
		}
	}
	return got
}

// acquisitionOrder sorts results by token (tokens grow with each hold)
// and returns the waiters' numbers in that order.
func acquisitionOrder(t *testing.T, got []waitResult) []int {
	t.Helper()
	slices.SortFunc(got, func(a, b waitResult) int { return cmp.Compare(a.token, b.token) })
	var order []int
	for _, res := range got {
		if res.err != nil {
			t.Fatalf("waiter %d: %v", res.k, res.err)
		}
		order = append(order, res.k)
	}
	return order
}

func TestLocalWaitersAcquireInArrivalOrder(t *testing.T) {
	r := newRig(t, 3)
	nt := roomyNodeTimeout(measureRTT(t, r.clients))
	// An hour's backoff: only releases move the queue.
	c := r.client(t, redlock.WithNodeTimeout(nt), redlock.WithRetry(fixedBackoff(time.Hour)))
	holder := setupHold(t, c, "fifo")
	const n = 5
	deadline := time.Now().Add(20 * n * nt)
	ctxs := make([]context.Context, n)
	for k := range ctxs {
		ctxs[k] = t.Context()
	}
	results := queueWaiters(t, r, c, "fifo", ctxs, deadline)
	if err := holder.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	order := acquisitionOrder(t, collect(t, results, n, deadline))
	if !slices.Equal(order, []int{0, 1, 2, 3, 4}) {
		t.Fatalf("waiters acquired in the order %v, want their arrival order [0 1 2 3 4]", order)
	}
}

func TestCancelledWaiterLeavesTheQueue(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cancelled int // which of 3 waiters
	}{{"behind the head", 1}, {"the head", 0}, {"the last", 2}} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, 3)
			nt := roomyNodeTimeout(measureRTT(t, r.clients))
			c := r.client(t, redlock.WithNodeTimeout(nt), redlock.WithRetry(fixedBackoff(time.Hour)))
			holder := setupHold(t, c, "q")
			deadline := time.Now().Add(60 * nt)
			ctxs := []context.Context{t.Context(), t.Context(), t.Context()}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			ctxs[tc.cancelled] = ctx
			results := queueWaiters(t, r, c, "q", ctxs, deadline)

			cancel()
			cancelledAt := time.Now()
			// Queued, it waits on nothing but its turn: it returns at once,
			// well within a node timeout.
			res := collect(t, results, 1, cancelledAt.Add(10*nt))[0]
			if res.k != tc.cancelled {
				t.Fatalf("waiter %d returned (%v), not the cancelled %d", res.k, res.err, tc.cancelled)
			}
			if !errors.Is(res.err, redlock.ErrNotAcquired) || !errors.Is(res.err, context.Canceled) {
				t.Errorf("cancelled waiter: %v, want ErrNotAcquired joined with context.Canceled", res.err)
			}
			if took := res.returned.Sub(cancelledAt); took > nt {
				t.Errorf("cancelled waiter returned %v after its ctx ended, want within a node timeout (%v)", took, nt)
			}

			// The others still get the lock, in their order.
			if err := holder.Unlock(t.Context()); err != nil {
				t.Fatal(err)
			}
			order := acquisitionOrder(t, collect(t, results, 2, deadline))
			want := slices.DeleteFunc([]int{0, 1, 2}, func(k int) bool { return k == tc.cancelled })
			if !slices.Equal(order, want) {
				t.Fatalf("remaining waiters acquired in the order %v, want %v", order, want)
			}
		})
	}
}

// sleepingHead is a Client on a fake clock whose default strategy waits a
// minute, and a Lock of "k" (held by hand) that sleeps that minute at the
// head of the Client's queue, registered on every node; its outcome (after
// its Unlock) comes on head.
func sleepingHead(t *testing.T) (r *rig, fake *clock.Fake, c *redlock.Client, ctx context.Context, head chan error) {
	t.Helper()
	r = newRig(t, 3)
	fake = clock.NewFake(epoch)
	c = r.client(t, redlock.WithClock(fake), redlock.WithRetry(fixedBackoff(time.Minute)))
	id := clientID(t, c)
	r.holdByHand(t, "k", "holder")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	head = make(chan error, 1)
	go func() {
		l, err := c.Lock(ctx, "k", 10*time.Second)
		if err == nil {
			err = l.Unlock(ctx)
		}
		head <- err
	}()
	if err := fake.BlockUntilContext(ctx, 1); err != nil { // refused and asleep
		t.Fatal(err)
	}
	r.awaitWaiting(t, "k", id)
	return r, fake, c, ctx, head
}

// A Lock whose retry strategy allows no retry is one attempt, like
// TryLock, even while another goroutine of the same Client waits for the
// key: it neither queues nor waits. Like TryLock it never registers, and
// so it is refused while a waiter is registered — here its own Client's
// head, first on every node — also when the key is free (the holder's key
// vanished without an announcement, and the head sleeps on): it must not
// take the key past the head, nor erase the head's place.
func TestLockWithoutRetriesBehindLocalWaiter(t *testing.T) {
	for _, retry := range []struct {
		name string
		s    redlock.RetryStrategy
	}{
		{"NoRetry", redlock.NoRetry()},
		{"LimitRetry 0", redlock.LimitRetry(fixedBackoff(time.Minute), 0)},
	} {
		for _, free := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, key free %v", retry.name, free), func(t *testing.T) {
				r, fake, c, ctx, head := sleepingHead(t)
				place := r.waiting(t, 0, "k")[0]
				if free {
					r.dropByHand(t, "k")
				}
				l, err := c.Lock(ctx, "k", 10*time.Second, redlock.WithLockRetry(retry.s))
				if err == nil {
					_ = l.Unlock(ctx)
					t.Fatalf("Lock with %s took the key past its own Client's registered head (waiting set then: %v)",
						retry.name, r.waiting(t, 0, "k"))
				}
				if !errors.Is(err, redlock.ErrNotAcquired) || ctx.Err() != nil {
					t.Fatalf("Lock with %s: %v (ctx %v), want ErrNotAcquired at once", retry.name, err, ctx.Err())
				}
				if got := r.waiting(t, 0, "k"); !slices.Equal(got, []string{place}) {
					t.Errorf("the head's place after the refusal: %v, want [%s]", got, place)
				}
				r.dropByHand(t, "k")
				fake.Advance(time.Minute) // the head's backoff: it takes the key
				if err := <-head; err != nil {
					t.Fatalf("head: %v", err)
				}
			})
		}
	}
}

// A queued Lock keeps its own retry strategy, whatever the head's: each
// backoff of its strategy (on the client's clock) counts as a refused try,
// without asking the nodes — its head is ahead of it there, so on a held
// key and on a free one alike its try would be refused — and it gives up
// when the strategy does, with ErrNotAcquired. (An earlier version let a
// queued Lock ask, and on a free key take it past its sleeping head; a
// zero backoff made it ask again at once after each refusal, hammering the
// nodes.) The head then takes the key. Counted on the nodes: no script
// runs while the queued Lock spends its budget.
func TestQueuedLockKeepsItsOwnRetryBudget(t *testing.T) {
	for _, tc := range []struct {
		name    string
		free    bool          // the holder's key vanished without an announcement
		backoff time.Duration // the queued Lock's, for each of its tries
		tries   int
	}{
		{name: "held key", backoff: 10 * time.Millisecond, tries: 2},
		{name: "free key", free: true, backoff: 10 * time.Millisecond, tries: 2},
		{name: "free key, zero backoff", free: true, tries: 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, fake, c, ctx, head := sleepingHead(t)
			if tc.free {
				r.dropByHand(t, "k")
			}
			resetStats(t, r)
			got := make(chan error, 1)
			go func() {
				l, err := c.Lock(ctx, "k", 10*time.Second,
					redlock.WithLockRetry(redlock.LimitRetry(fixedBackoff(tc.backoff), tc.tries)))
				if err == nil {
					err = l.Unlock(ctx)
				}
				got <- err
			}()
			// Each of its backoffs is a timer beside the head's: the test
			// moves the clock by one once both are armed. (Zero backoffs
			// fire as they are armed.)
			advances := 0
			var err error
			if tc.backoff == 0 {
				err = <-got
			}
		spend:
			for tc.backoff > 0 {
				armed := make(chan error, 1)
				bctx, bcancel := context.WithCancel(ctx)
				go func() { armed <- fake.BlockUntilContext(bctx, 2) }()
				select {
				case err = <-got:
					bcancel()
					<-armed
					break spend
				case aerr := <-armed:
					bcancel()
					if aerr != nil {
						t.Fatalf("the queued Lock neither returned nor slept: %v", aerr)
					}
				}
				if advances == tc.tries {
					t.Fatalf("the queued Lock sleeps a backoff past its budget of %d tries", tc.tries)
				}
				fake.Advance(tc.backoff)
				advances++
			}
			if !errors.Is(err, redlock.ErrNotAcquired) || ctx.Err() != nil {
				t.Fatalf("queued Lock: %v (ctx %v), want ErrNotAcquired once its budget is spent", err, ctx.Err())
			}
			if tc.backoff > 0 && advances != tc.tries {
				t.Errorf("the queued Lock gave up after %d backoffs, want its %d", advances, tc.tries)
			}
			if n := cmdCalls(t, r, "evalsha") + cmdCalls(t, r, "eval"); n != 0 {
				t.Errorf("%d scripts ran on the nodes while the queued Lock spent its budget: it asked", n)
			}
			if !tc.free {
				r.dropByHand(t, "k")
			}
			fake.Advance(time.Minute) // the head's backoff: it takes the key
			if err := <-head; err != nil {
				t.Fatalf("head: %v", err)
			}
		})
	}
}

// One process, several goroutines on one key, a backoff that never runs
// out during the run: only releases move the queue. By the rule each hold
// costs two attempts: the one that takes the key (the head, woken by the
// release that names it), and the first try of the waiter behind it,
// which becomes the head when the key is taken and tries at once — to
// enter its place on the nodes; refused while the hold lasts, or granted if
// the hold already ended. Add one for the first head, which asks again
// once subscribed (a release before that went unheard). More would be a
// head asking while the key is held: woken by a release that did not name
// it, or by its own Client's release announced late.
func TestOneProcessAsksAboutTwicePerHold(t *testing.T) {
	r := newRig(t, 5)
	rtt := measureRTT(t, r.clients)
	asks := &askCounter{}
	c := newProcess(t, r, max(250*time.Millisecond, 100*rtt), asks, redlock.WithRetry(fixedBackoff(time.Hour)))
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	const goroutines, each = 16, 20
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for range goroutines {
		wg.Go(func() {
			for range each {
				l, err := c.Lock(ctx, "single", 10*time.Second)
				if err != nil {
					errs <- err
					return
				}
				time.Sleep(time.Millisecond) // the work under the lock, as in the benchmark
				if err := l.Unlock(ctx); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	holds := int64(goroutines * each)
	attempts := asks.perNode(len(r.clients))
	t.Logf("%d holds, %.1f attempts (%.2f per hold)", holds, attempts, attempts/float64(holds))
	if bound := float64(2*holds + 1); attempts > bound {
		t.Errorf("%.1f attempts for %d holds, want at most %.0f: heads ask while the key is held", attempts, holds, bound)
	}
}

// The holder's key vanished from every node (its TTL ran out, unannounced)
// while a waiter of its own process sleeps at the head of the queue: the
// Unlock reports ErrLockLost (it released nothing, and so announced
// nothing), and the waiter still gets the key, by its backoff at the
// latest, with a larger token.
func TestUnlockOfALostHoldWithALocalWaiter(t *testing.T) {
	r := newRig(t, 3)
	fake := clock.NewFake(epoch)
	c := r.client(t, redlock.WithClock(fake), redlock.WithRetry(fixedBackoff(time.Minute)))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	const key = "lost-with-waiter"
	first := setupHold(t, c, key)
	got := asleepOnFake(ctx, t, r, c, fake, key)
	r.dropByHand(t, key)
	if err := first.Unlock(ctx); !errors.Is(err, redlock.ErrLockLost) {
		t.Errorf("Unlock of a hold gone from every node: %v, want ErrLockLost", err)
	}
	fake.Advance(time.Minute)
	res := <-got
	if res.err != nil {
		t.Fatalf("waiter: %v", res.err)
	}
	defer func() { _ = res.l.Unlock(context.WithoutCancel(ctx)) }()
	if res.l.Token() <= first.Token() {
		t.Errorf("waiter's token %d after %d", res.l.Token(), first.Token())
	}
	if n := r.holders(t, key, res.l.Value()); n < c.Quorum() {
		t.Errorf("the waiter's hold is on %d nodes", n)
	}
}

// A head whose Client's departed waiter still has its entry on the nodes
// (older, its withdraw not arrived yet: sent behind the Client's other
// calls, or after a NOSCRIPT) is refused where the key is free: that entry
// is first there. The refusal enters the head's own entry in its place, so
// the node would grant the head's next try; but no release will come. The
// refusal changed the node's first waiter with the key free, so the node
// announces it, to the head itself, and the refusal's reply says the same
// (the head counts either): on a strategy that sleeps an hour, it must not
// sleep at all.
func TestARefusalByADepartedWaitersEntryWakesTheHead(t *testing.T) {
	r := newRig(t, 3)
	fake := clock.NewFake(epoch)
	c := r.client(t, redlock.WithClock(fake), redlock.WithRetry(fixedBackoff(time.Hour)))
	id := clientID(t, c)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	waitOnce(ctx, t, r, c, fake, id, "k")

	// The departed waiter's entry: a second older than the next wait,
	// leased for an hour; the key free.
	order, leases := waitKeys("k")
	for i, rc := range r.clients {
		now, err := rc.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		if err := rc.ZAdd(ctx, order, redis.Z{Score: float64(epoch.Add(-time.Second).UnixMilli()), Member: id}).Err(); err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		if err := rc.ZAdd(ctx, leases, redis.Z{Score: float64(now.Add(time.Hour).UnixMilli()), Member: id}).Err(); err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
	}
	got := startLock(ctx, c, "k", time.Minute)
	res, ok := awaitLock(t, got, 10*time.Second)
	if !ok {
		t.Fatalf("Lock did not return within 10s with the key free on every node: asleep for its hour (fake clock at %v)", fake.Now().Sub(epoch))
	}
	if res.err != nil {
		t.Fatalf("Lock: %v", res.err)
	}
	if d := fake.Now().Sub(epoch); d != 0 {
		t.Errorf("the fake clock moved %v: the test must not advance it", d)
	}
	if err := res.l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// waitOnce makes c, on the fake clock fake, wait for key once (held by
// hand, then released by hand on every node) and unlock it: the Client then
// listens for key's releases, so that its next Lock's first refusal is not
// followed by the look again that a fresh subscription makes. id is c's.
func waitOnce(ctx context.Context, t *testing.T, r *rig, c *redlock.Client, fake *clock.Fake, id, key string) {
	t.Helper()
	r.holdByHand(t, key, "other")
	first := startLock(ctx, c, key, time.Minute)
	if err := fake.BlockUntilContext(ctx, 1); err != nil { // refused and asleep
		t.Fatal(err)
	}
	r.awaitWaiting(t, key, id)
	for i := range r.clients {
		r.releaseByHand(t, i, key)
	}
	res, ok := awaitLock(t, first, 10*time.Second)
	if !ok || res.err != nil {
		t.Fatalf("the first wait: %v (returned %v)", res.err, ok)
	}
	if err := res.l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
