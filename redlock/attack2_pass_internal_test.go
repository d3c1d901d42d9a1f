package redlock

import (
	"sync"
	"testing"
	"time"
)

// A head that finds the key taken lets the hold pass and waits for its
// release. That release may be announced at any moment, also while the
// head decides: it must never be lost, or the head sleeps until its
// backoff although the key is free and every node announced it. Run many
// times with the announcements concurrent with the decision.
func TestAttack2PassNeverLosesTheRelease(t *testing.T) {
	c := &Client{nodes: make([]node, 3), quorum: 2, closing: make(chan struct{})}
	w := newWaitQueues(c)
	const key = "k"
	channel := releaseChannel(key)
	lost := 0
	for range 5000 {
		q, me := w.join(key)
		for i := range c.nodes {
			w.deliver(i, channel, "", true)
		}
		for i := range c.nodes { // a release wakes the head
			w.deliver(i, channel, "first-holder", false)
		}
		<-q.released
		for i := range c.nodes { // meanwhile another process took the key
			w.deliver(i, channel, "+second-holder", false)
		}
		var wg sync.WaitGroup
		wg.Go(func() {
			for i := range c.nodes { // and releases it
				w.deliver(i, channel, "second-holder", false)
			}
		})
		passed := w.letPass(q, time.Minute)
		wg.Wait()
		if passed {
			select {
			case <-q.released:
			default:
				lost++
			}
		}
		w.leave(key, q, me, time.Time{})
		w.mu.Lock()
		delete(w.queues, key)
		w.idle = nil
		w.mu.Unlock()
	}
	if lost > 0 {
		t.Fatalf("%d of 5000 heads let a hold pass and lost its release, announced on every node", lost)
	}
}
