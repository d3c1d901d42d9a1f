package redlock_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/clock"
	"github.com/fencedlock/fencedlock/redlock"
)

// Claim 6 across Clients (docs/protocol.md, the waiting rule): each node
// keeps the key's waiting set, ordered by (wait start, Client id), and
// grants the key only to a caller that no other entry is older than. So
// waiters of separate processes are served in the order they began to
// wait, and nobody barges past a registered waiter. (How long a place
// lasts is in place_test.go; per-Client shares under contention in
// contention_test.go.)

// awaitLaterMilli waits until the clock has passed the wait start of the
// last waiter registered for key: the next Lock begins to wait in a later
// millisecond, and so is younger by its start, not by a tie of Client ids.
func awaitLaterMilli(t *testing.T, r *rig, key string) {
	t.Helper()
	w := r.waiting(t, 0, key)
	since, _, _ := strings.Cut(w[len(w)-1], " ")
	eventually(t, time.Now().Add(time.Second), "a later millisecond", func() bool {
		return fmt.Sprint(time.Now().UnixMilli()) > since // same length: compares as numbers
	})
}

// (a) A holder, then Clients B, C and D begin to wait, each once the one
// before is registered on the nodes; the holder releases: they acquire in
// the order B, C, D. Only the named waiter asks at each release: counted
// on each Client, every waiter makes one attempt from the release on, the
// one that takes the key. Before it, each waiter was refused twice: once,
// and once more when subscribed (a release before its subscription went
// unheard). The backoff is an hour: only releases move the waiters.
func TestWaitersOfSeparateClientsAreServedInWaitOrder(t *testing.T) {
	r := newRig(t, 3)
	nt := roomyNodeTimeout(measureRTT(t, r.clients))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	const key = "in-order"
	var (
		waiters []*redlock.Client
		asks    []*askCounter
		ids     []string
	)
	for range 3 {
		a := &askCounter{}
		c := newProcess(t, r, nt, a, redlock.WithRetry(fixedBackoff(time.Hour)))
		ids = append(ids, clientID(t, c))
		// clientID's TryLock is not the run's: its last answer may come
		// after it returned.
		eventually(t, time.Now().Add(40*nt), "the probe's answers", func() bool { return a.perNode(len(r.clients)) >= 1 })
		a.n.Store(0)
		waiters, asks = append(waiters, c), append(asks, a)
	}
	r.holdByHand(t, key, "holder") // on every node: a TryLock's last grant may land after a waiter's try
	type served struct {
		who   int
		token uint64
	}
	out := make(chan served, 3)
	for i, c := range waiters {
		if i > 0 {
			awaitLaterMilli(t, r, key)
		}
		go func() {
			l, err := c.Lock(ctx, key, time.Minute)
			if err != nil {
				t.Errorf("waiter %c: %v", 'B'+i, err)
				out <- served{who: i}
				return
			}
			out <- served{i, l.Token()}
			_ = l.Unlock(ctx)
		}()
		r.awaitWaiting(t, key, ids[:i+1]...)
		eventually(t, time.Now().Add(40*nt), "two refused attempts", func() bool {
			return asks[i].perNode(len(r.clients)) >= 2
		})
	}
	for i := range r.clients {
		r.releaseByHand(t, i, key)
	}
	var got []served
	for range 3 {
		select {
		case s := <-out:
			got = append(got, s)
		case <-time.After(40 * nt):
			t.Fatalf("%d of 3 waiters served %v after the release", len(got), 40*nt)
		}
	}
	slices.SortFunc(got, func(a, b served) int { return cmp.Compare(a.token, b.token) })
	var order string
	for _, s := range got {
		order += string(rune('B' + s.who))
	}
	if order != "BCD" {
		t.Errorf("served in the order %s, want BCD (the order they began to wait)", order)
	}
	for i, a := range asks {
		// Lock returns at a quorum: the last node's answer may come after.
		eventually(t, time.Now().Add(40*nt), "the last answers", func() bool { return a.perNode(len(r.clients)) >= 3 })
		if n := a.perNode(len(r.clients)); n != 3 {
			t.Errorf("waiter %c made %.1f attempts, want 3: two before the release, one that took the key", 'B'+i, n)
		}
	}
}

// A waiter with a backoff far longer than the run does not lose its turn
// to a process whose two goroutines hand the key back and forth: once it
// is registered, the other process holds the key only for its waiters
// that began to wait before it (at most its two goroutines), and none
// that began after it. (Before the rule, the other process handed the key
// on a dozen times in a row while the waiter slept its backoff.)
func TestALongBackoffDoesNotLoseAWaitersTurn(t *testing.T) {
	r := newRig(t, 3)
	nt := roomyNodeTimeout(measureRTT(t, r.clients))
	cs := separateClients(t, r, 2, nt)
	a, b := cs[0], cs[1]
	bID := clientID(t, b)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	const key = "long-backoff"
	hold := nt // an attempt takes less: the waiter's first try lands within a hold
	var (
		mu     sync.Mutex // protects aHolds
		aHolds []acquisition
		wg     sync.WaitGroup
	)
	for g := range 2 {
		wg.Go(func() {
			for ctx.Err() == nil {
				l, err := a.Lock(ctx, key, time.Minute)
				if err != nil {
					return
				}
				mu.Lock()
				aHolds = append(aHolds, acquisition{0, g, l.Token(), sinceOf(t, l.Value())})
				mu.Unlock()
				select {
				case <-time.After(hold): // the critical section
				case <-ctx.Done():
				}
				_ = l.Unlock(context.WithoutCancel(ctx))
			}
		})
	}
	eventually(t, time.Now().Add(20*time.Second), "A's goroutines take turns", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(aHolds) >= 2
	})
	got := startLock(ctx, b, key, time.Minute, redlock.WithLockRetry(fixedBackoff(time.Hour)))
	eventually(t, time.Now().Add(10*time.Second), "B registered", func() bool {
		return slices.ContainsFunc(r.waiting(t, 0, key), func(w string) bool { return strings.HasSuffix(w, bID) })
	})
	mu.Lock()
	registered := len(aHolds)
	mu.Unlock()
	var res lockResult
	select {
	case res = <-got:
	case <-time.After(20 * hold):
		t.Fatalf("B waits %v after it registered", 20*hold)
	}
	if res.err != nil {
		t.Fatal(res.err)
	}
	bSince := sinceOf(t, res.l.Value())
	_ = res.l.Unlock(ctx)
	cancel()
	wg.Wait()
	var between, younger int
	for _, h := range aHolds {
		if h.token > res.l.Token() {
			continue
		}
		if h.since > bSince {
			younger++
		}
	}
	for _, h := range aHolds[registered:] {
		if h.token < res.l.Token() {
			between++
		}
	}
	t.Logf("A held the key %d times after B registered and before B (bound 2); %d of A's holds before B's began to wait after B", between, younger)
	if between > 2 {
		t.Errorf("A held the key %d times in a row while B waited (bound 2, the goroutines that waited before B)", between)
	}
	if younger > 0 {
		t.Errorf("%d holds of A whose waiters began to wait after B were served before B", younger)
	}
}

// (b) With a waiter registered on every node and the key free (its
// holder's key vanished without a word, and the waiter sleeps on), a
// TryLock — of another Client, or of the waiter's own — is refused, and a
// newcomer's Lock is refused and waits behind it: the waiter, once its
// backoff ends, takes the key first. TryLock never registers: the waiting
// set holds the same waiter after it.
func TestNoBargingPastARegisteredWaiter(t *testing.T) {
	for _, who := range []string{"TryLock of another Client", "TryLock of the waiter's Client", "Lock of another Client"} {
		t.Run(who, func(t *testing.T) {
			r := newRig(t, 3)
			fake := clock.NewFake(epoch)
			w := r.client(t, redlock.WithClock(fake), redlock.WithRetry(fixedBackoff(time.Minute)))
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			const key = "no-barging"
			wID := clientID(t, w)
			r.holdByHand(t, key, "holder")
			waiter := asleepOnFake(ctx, t, r, w, fake, key)
			r.dropByHand(t, key)
			var newcomer <-chan lockResult
			switch who {
			case "TryLock of another Client", "TryLock of the waiter's Client":
				c := w
				if who == "TryLock of another Client" {
					c = r.client(t)
				}
				if l, err := c.TryLock(ctx, key, time.Minute); !errors.Is(err, redlock.ErrNotAcquired) {
					if err == nil {
						_ = l.Unlock(ctx)
					}
					t.Fatalf("%s on the free key with a waiter registered: %v, want ErrNotAcquired", who, err)
				}
				r.awaitWaiting(t, key, wID)
			default:
				nfake := clock.NewFake(epoch.Add(time.Second))
				n := r.client(t, redlock.WithClock(nfake), redlock.WithRetry(fixedBackoff(time.Minute)))
				nID := clientID(t, n)
				newcomer = asleepOnFake(ctx, t, r, n, nfake, key)
				r.awaitWaiting(t, key, wID, nID)
			}
			fake.Advance(time.Minute) // the waiter's backoff: it asks
			res := <-waiter
			if res.err != nil {
				t.Fatalf("the waiter: %v", res.err)
			}
			if err := res.l.Unlock(ctx); err != nil { // names the newcomer
				t.Fatal(err)
			}
			if newcomer != nil {
				nres := <-newcomer
				if nres.err != nil {
					t.Fatalf("the newcomer: %v", nres.err)
				}
				_ = nres.l.Unlock(ctx)
				if nres.l.Token() <= res.l.Token() {
					t.Errorf("the newcomer's token %d before the waiter's %d", nres.l.Token(), res.l.Token())
				}
			}
		})
	}
}
