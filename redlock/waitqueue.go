package redlock

import (
	"context"
	"slices"
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
	// Guarded by waitQueues.mu:
	heard  []bool    // nodes that announced the release of heardV
	nheard int       // how many are true in heard
	heardV string    // the released value the announcements are about
	local  [8]string // values released by this process lately (ring)
	nlocal int       // next slot in local
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
		q = &keyQueue{key: key, released: make(chan struct{}, 1), subbed: make(chan struct{}),
			heard: make([]bool, len(w.c.nodes))}
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

// waiting reports whether waiters for key are queued in this process.
func (w *waitQueues) waiting(key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queues[key]
	return q != nil && len(q.waiters) > 0
}

// drain forgets announced releases before a new attempt.
func (w *waitQueues) drain(q *keyQueue) {
	w.mu.Lock()
	clear(q.heard)
	q.nheard = 0
	w.mu.Unlock()
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

// releasing notes that this process is about to release value: the
// nodes' announcements of it are ignored, since wake tells the head sooner.
func (w *waitQueues) releasing(key, value string) {
	w.mu.Lock()
	if q := w.queues[key]; q != nil {
		q.local[q.nlocal%len(q.local)] = value
		q.nlocal++
	}
	w.mu.Unlock()
}

// wake tells the local head of key's queue that this process released key.
func (w *waitQueues) wake(key string) {
	w.mu.Lock()
	q := w.queues[key]
	w.mu.Unlock()
	if q != nil {
		q.signal()
	}
}

// deliver routes node's pub/sub event for channel to its queue. A release
// wakes the head once a quorum of nodes announced it: woken by the first
// node alone, the head would find the key still held on the others.
func (w *waitQueues) deliver(node int, channel, value string, confirmed bool) {
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
		if slices.Contains(q.local[:], value) {
			return // our own release: the head was woken already
		}
		if value != q.heardV { // announcements of an older release are stale
			clear(q.heard)
			q.nheard, q.heardV = 0, value
		}
		if !q.heard[node] {
			q.heard[node] = true
			q.nheard++
		}
		if q.nheard >= w.c.quorum {
			q.signal()
		}
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
