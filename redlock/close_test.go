package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/redlock"
)

// TestCloseEndsHeldLocks: Close stops the client's background work, and
// with it ends its holds: Done closes, and the watchdog extends no more
// (the locks stay on the nodes until their TTL).
func TestCloseEndsHeldLocks(t *testing.T) {
	r := newRig(t, 3)
	nt := roomyNodeTimeout(measureRTT(t, r.clients))
	ttl := 30 * nt // the watchdog extends every ttl/3
	rec := newEventLog()
	c := r.client(t, redlock.WithObserver(rec), redlock.WithNodeTimeout(nt))
	ctx := t.Context()
	watched, err := c.TryLock(ctx, "watched", ttl, redlock.AutoExtend())
	if err != nil {
		t.Fatal(err)
	}
	waited, err := c.TryLock(ctx, "waited", ttl)
	if err != nil {
		t.Fatal(err)
	}
	waitedDone := waited.Done() // asked before Close
	plain, err := c.TryLock(ctx, "plain", ttl)
	if err != nil {
		t.Fatal(err)
	}

	closed := make(chan struct{})
	go func() {
		_ = c.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(ttl):
		t.Fatalf("Close did not return within the ttl %v", ttl)
	}
	closedAt := time.Now()
	extensions := rec.count(isKind("extended"))
	for _, h := range []struct {
		name string
		done <-chan struct{}
	}{{"watched", watched.Done()}, {"waited", waitedDone}} {
		select {
		case <-h.done:
		default:
			t.Errorf("%s lock's Done still open after Close returned", h.name)
		}
	}
	select { // Done asked for only after Close
	case <-plain.Done():
	case <-time.After(nt):
		t.Error("Done of a lock asked for after Close did not close within a node timeout")
	}

	// The watchdog stopped: nothing moves the key's TTL back up, so it runs
	// down below ttl/2 — a running watchdog keeps it above 2/3 ttl.
	eventually(t, closedAt.Add(ttl), "watched key's PTTL below ttl/2", func() bool {
		return r.clients[0].PTTL(ctx, "watched").Val() < ttl/2
	})
	if n := rec.count(isKind("extended")); n != extensions {
		t.Errorf("%d extensions after Close", n-extensions)
	}
	if got := r.holders(t, "watched", watched.Value()); got < c.Quorum() {
		t.Errorf("the watched lock is on %d nodes after Close, want it left to its TTL on a quorum", got)
	}
}

// Close concurrent with every kind of call: no panic, no race, Close within
// its bound, every call returns soon after, and no grant is left behind but
// the holds that were handed out (which Close leaves to their TTL).
func TestCloseDuringCalls(t *testing.T) {
	t.Parallel() // no timing judged but roomy bounds: runs beside the others of its kind
	for round := range 5 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			r := newRig(t, 3)
			// Roomier than roomyNodeTimeout: a release that times out may
			// leave its grant until the TTL (by design), and under CI's
			// load (two test binaries and a busy core on 2 cores, -race)
			// calls took 70-100 ms in the traces of this test.
			nt := max(roomyNodeTimeout(measureRTT(t, r.clients)), 200*time.Millisecond)
			slow := &slowCalls{}
			c := r.client(t, redlock.WithNodeTimeout(nt), redlock.WithObserver(slow))
			ctx := t.Context()
			ttl := time.Minute

			var (
				mu      sync.Mutex // protects handed
				handed  = map[string]bool{}
				wg      sync.WaitGroup
				started = make(chan struct{}, 64)
			)
			keep := func(l *redlock.Lock) {
				mu.Lock()
				handed[l.Value()] = true
				mu.Unlock()
			}
			for g := range 12 {
				key := fmt.Sprintf("close:%d", g%4)
				wg.Go(func() {
					for i := 0; ; i++ {
						select {
						case started <- struct{}{}:
						default:
						}
						var (
							l   *redlock.Lock
							err error
						)
						switch (g + i) % 3 {
						case 0:
							l, err = c.TryLock(ctx, key, ttl)
						case 1:
							lctx, cancel := context.WithTimeout(ctx, 20*nt)
							l, err = c.Lock(lctx, key, ttl, redlock.AutoExtend())
							cancel()
						default:
							err = c.Do(ctx, key, ttl, func(ctx context.Context, l *redlock.Lock) error {
								keep(l)
								return l.Extend(ctx, ttl)
							})
						}
						if l != nil {
							keep(l)
							_ = l.Done()
							_ = l.Extend(ctx, ttl)
							_ = l.Unlock(ctx)
						}
						if err != nil && !errors.Is(err, redlock.ErrNotAcquired) && !errors.Is(err, redlock.ErrLockLost) {
							var ne *redlock.NodeError
							if !errors.As(err, &ne) {
								t.Errorf("call: %v", err)
							}
						}
						if err != nil && l == nil && errors.Is(err, redlock.ErrNotAcquired) && isClosedErr(err) {
							return
						}
					}
				})
			}
			for range 12 {
				<-started
			}
			start := time.Now()
			_ = c.Close()
			closeTook := time.Since(start)
			// About two node timeouts; longer only when the machine ran
			// calls slower than the node timeout meanwhile (Close waits for
			// the releases those owe), and never past its cap.
			if closeTook > 3*nt && (!slow.since(start) || closeTook > 21*nt) {
				t.Errorf("Close took %v, node timeout %v (calls timed out during Close: %v)", closeTook, nt, slow.since(start))
			}
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(100 * nt):
				t.Fatalf("calls still running %v after Close", 100*nt)
			}
			for i, rc := range r.clients {
				for g := range 4 {
					key := fmt.Sprintf("close:%d", g)
					v := rc.Get(ctx, key).Val()
					mu.Lock()
					ok := v == "" || handed[v]
					mu.Unlock()
					if !ok && slow.timedOut(i) {
						// Its release may have timed out: by design it is
						// not sent again, and the grant stays until the TTL.
						t.Logf("node %d: key %s holds %q; calls to that node timed out", i, key, v)
						continue
					}
					if !ok {
						t.Errorf("node %d: key %s holds %q, a grant of no hold handed out", i, key, v)
					}
				}
			}
		})
	}
}

// isClosedErr reports whether err says the client was closed.
func isClosedErr(err error) bool {
	return err != nil && strings.Contains(err.Error(), "client closed")
}

// slowCalls is an Observer that notes when a node call last timed out, and
// on which nodes calls did.
type slowCalls struct {
	redlock.NopObserver
	mu    sync.Mutex
	last  time.Time
	nodes map[int]bool
}

func (o *slowCalls) NodeError(err *redlock.NodeError) {
	if errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "node timeout") {
		o.mu.Lock()
		o.last = time.Now()
		if o.nodes == nil {
			o.nodes = map[int]bool{}
		}
		o.nodes[err.Node] = true
		o.mu.Unlock()
	}
}

// timedOut reports whether a call to node i timed out.
func (o *slowCalls) timedOut(i int) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.nodes[i]
}

// since reports whether a call timed out after start.
func (o *slowCalls) since(start time.Time) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.last.After(start)
}
