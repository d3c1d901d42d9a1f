package redlock_test

import (
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
