package redlock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/redlock"
)

// With a node frozen, a holder that keeps extending while Close runs must
// not hold Close: each Extend's call to the frozen node stays in flight
// until its deadline, and Close waits for the calls in flight. An Extend
// after Close began ends the hold instead (Close ends every hold). Found by
// attack 7: Close took 20 node timeouts, its whole cap.
func TestCloseBoundedWithFrozenNodeWhileHolderExtends(t *testing.T) {
	r := newRig(t, 3)
	nt := roomyNodeTimeout(measureRTT(t, r.clients))
	c := r.client(t, redlock.WithNodeTimeout(nt))
	ctx := t.Context()
	l, err := c.TryLock(ctx, "hb", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.procs[2].Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.procs[2].Resume() })

	first := make(chan struct{})
	closed := make(chan struct{})
	hbDone := make(chan error, 1)
	go func() { // the holder's heartbeat: extend, then again a while later
		var err error
		defer func() { hbDone <- err }()
		for i := 0; ; i++ {
			err = l.Extend(ctx, time.Minute) // a quorum (nodes 0 and 1) answers
			if i == 0 {
				close(first) // node 2's call of it is in flight
			}
			if err != nil {
				return
			}
			t := time.NewTimer(nt / 4)
			select {
			case <-t.C:
			case <-closed:
				t.Stop()
				return
			}
		}
	}()
	<-first
	start := time.Now()
	_ = c.Close()
	took := time.Since(start)
	close(closed)
	<-hbDone
	if took > 5*nt {
		t.Errorf("Close took %v (%.1f node timeouts of %v) with a node frozen and the holder extending",
			took, float64(took)/float64(nt), nt)
	}
	if err := l.Extend(ctx, time.Minute); !errors.Is(err, redlock.ErrLockLost) {
		t.Errorf("Extend after Close: %v, want ErrLockLost", err)
	}
	select {
	case <-l.Done():
	default:
		t.Error("the hold's Done is open after Close")
	}
}
