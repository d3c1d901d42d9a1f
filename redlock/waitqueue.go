package redlock

import (
	"context"
	"sync"
	"time"
)

// waitQueues keeps, per key, the local waiters in arrival order and the
// key's pub/sub subscription on every node. Only the head of a queue retries
// on the wire; a release wakes the head, not the whole herd.
type waitQueues struct {
	c    *Client
	subs []*subscriber // per node, started on first use

	mu     sync.Mutex // protects queues, closed
	queues map[string]*keyQueue
	closed bool
}

type keyQueue struct {
	key      string
	waiters  []chan struct{} // closed when that waiter becomes the head
	released chan struct{}   // a release of key was announced (buffered 1)
	subbed   chan struct{}   // closed on the first node's subscribe confirmation
	asked    bool            // subscriptions were sent; guarded by waitQueues.mu
}

func newWaitQueues(c *Client) *waitQueues {
	w := &waitQueues{c: c, queues: make(map[string]*keyQueue)}
	w.subs = make([]*subscriber, len(c.nodes))
	for i := range c.nodes {
		w.subs[i] = newSubscriber(c, i, w)
	}
	return w
}

// join queues a waiter for key; the returned channel is closed when it is
// the head.
func (w *waitQueues) join(key string) (*keyQueue, chan struct{}) {
	me := make(chan struct{})
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queues[key]
	if q == nil {
		q = &keyQueue{key: key, released: make(chan struct{}, 1), subbed: make(chan struct{})}
		w.queues[key] = q
	}
	q.waiters = append(q.waiters, me)
	if len(q.waiters) == 1 {
		close(me)
	}
	return q, me
}

// leave removes a waiter; the next one becomes the head. The last one out
// drops the queue and its subscription.
func (w *waitQueues) leave(key string, q *keyQueue, me chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, x := range q.waiters {
		if x == me {
			q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
			if i == 0 && len(q.waiters) > 0 {
				close(q.waiters[0])
			}
			break
		}
	}
	if len(q.waiters) == 0 && w.queues[key] == q {
		delete(w.queues, key)
		if q.asked && !w.closed {
			for _, s := range w.subs {
				s.send(subOp{channel: releaseChannel(key)})
			}
		}
	}
}

// ready subscribes q's key on every node (once per queue) and waits for the
// first confirmation, at most timeout: without one the waiter still works,
// on backoff and the holder's TTL alone.
func (w *waitQueues) ready(ctx context.Context, q *keyQueue, timeout time.Duration) {
	w.mu.Lock()
	first := !q.asked && !w.closed
	q.asked = true
	w.mu.Unlock()
	if first {
		for _, s := range w.subs {
			s.send(subOp{channel: releaseChannel(q.key), sub: true})
		}
	}
	t := time.NewTimer(timeout) // a network wait: real time
	defer t.Stop()
	select {
	case <-q.subbed:
	case <-t.C:
	case <-ctx.Done():
	}
}

// drain forgets an announced release before a new attempt.
func (q *keyQueue) drain() {
	select {
	case <-q.released:
	default:
	}
}

func (q *keyQueue) signal() {
	select {
	case q.released <- struct{}{}:
	default:
	}
}

// wake tells the local head of key's queue that key was released.
func (w *waitQueues) wake(key string) {
	w.mu.Lock()
	q := w.queues[key]
	w.mu.Unlock()
	if q != nil {
		q.signal()
	}
}

// deliver routes a pub/sub event for channel to its queue.
func (w *waitQueues) deliver(channel string, confirmed bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	const prefix = "fencedlock:released:"
	if len(channel) < len(prefix) {
		return
	}
	q := w.queues[channel[len(prefix):]]
	if q == nil {
		return
	}
	if !confirmed {
		q.signal()
		return
	}
	select {
	case <-q.subbed:
	default:
		close(q.subbed)
	}
}

func (w *waitQueues) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	for _, s := range w.subs {
		s.close()
	}
}
