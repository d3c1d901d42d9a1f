package redlock

import (
	"context"

	"github.com/google/uuid"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// waitQueues keeps, per key, this Client's waiters in arrival order, and the
// key's release channel subscribed on every node. Only the head of a queue
// is on the wire: it holds the Client's place in the key's waiting set on
// the nodes (see scripts/waiting.lua), and wakes when a quorum of nodes
// announced a release that frees the key for it. A queue whose last waiter
// left stays subscribed while it is among the maxIdle most recently used: a
// key that is waited for once is usually waited for again, and subscribing
// anew costs a round trip to every node.
type waitQueues struct {
	c    *Client
	subs []*subscriber // per node, started on first use

	mu     sync.Mutex // protects queues, idle, closed and the queues' fields below
	queues map[string]*keyQueue
	idle   []string // keys of queues without waiters, least recently used first
	closed bool
}

// maxIdle bounds the subscribed queues that have no waiter: a bound on the
// state a Client keeps (a channel on each node's pub/sub connection each),
// not a timing.
const maxIdle = 64

type keyQueue struct {
	key       string
	woken     chan struct{} // buffered 1: a quorum of nodes freed the key for the head
	confirmed chan struct{} // buffered 1: a node confirmed the subscription

	// Guarded by waitQueues.mu:
	waiters []*waiter // in arrival order; the first is the head
	asked   bool      // subscriptions were sent
	subbed  []bool    // nodes that confirmed the subscription
	nsubbed int       // how many are true in subbed
	free    []bool    // nodes that announced, since the head's last try began, a release that frees the key for it
	nfree   int       // how many are true in free
	heard   []string  // per node, the released value of the last announcement counted (it comes twice: see Lock.Unlock)
}

// waiter is one Lock call waiting for a key.
type waiter struct {
	q       *keyQueue
	since   int64         // its wait start, ms on the Client's clock: its place in the waiting set
	timeout time.Duration // its node timeout
	head    chan struct{} // closed when it is the head of its queue

	// Guarded by waitQueues.mu:
	entered bool      // the nodes may keep its place: it tried as the head, or an Unlock passed it the Client's
	placed  bool      // it became the head when the one before it acquired the key: that hold's Unlock passes it the Client's place
	due     time.Time // when its current sleep ends, on the Client's clock (zero: not asleep)
	leased  time.Time // when the place an Unlock passed it lapses, on the Client's clock (zero: none)
}

func newWaitQueues(c *Client) *waitQueues {
	w := &waitQueues{c: c, queues: make(map[string]*keyQueue)}
	w.subs = make([]*subscriber, len(c.nodes))
	for i := range c.nodes {
		w.subs[i] = newSubscriber(c, i, w)
	}
	return w
}

// join queues a waiter for key that began to wait at since; timeout is
// its node timeout.
func (w *waitQueues) join(key string, since time.Time, timeout time.Duration) *waiter {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queues[key]
	if q == nil {
		n := len(w.c.nodes)
		q = &keyQueue{key: key, woken: make(chan struct{}, 1), confirmed: make(chan struct{}, 1),
			subbed: make([]bool, n), free: make([]bool, n), heard: make([]string, n)}
		w.queues[key] = q
	}
	if len(q.waiters) == 0 {
		w.idle = slices.DeleteFunc(w.idle, func(k string) bool { return k == key })
	}
	me := &waiter{q: q, since: since.UnixMilli(), timeout: timeout, head: make(chan struct{})}
	q.waiters = append(q.waiters, me)
	if len(q.waiters) == 1 {
		close(me.head)
	}
	return me
}

// atHead reports whether me heads its queue.
func (me *waiter) atHead() bool {
	select {
	case <-me.head:
		return true
	default:
		return false
	}
}

// leave removes me; the next waiter becomes the head. A head that leaves
// with the key leaves the next one its place, at the Unlock (see passOn); one
// that leaves without it withdraws its place from the nodes (withdraw.lua),
// so that the next waiters need not wait for its lease. The last one out
// makes the queue idle; the least recently used idle queue beyond maxIdle
// is dropped with its subscription.
func (w *waitQueues) leave(me *waiter, acquired bool) {
	q := me.q
	w.mu.Lock()
	defer w.mu.Unlock()
	if me.entered && !acquired { // also after Close: a send then goes on its own
		w.c.withdraw(q.key, me.since, me.timeout, w.c.all...)
	}
	i := slices.Index(q.waiters, me)
	q.waiters = slices.Delete(q.waiters, i, i+1)
	if i == 0 && len(q.waiters) > 0 {
		q.waiters[0].placed = acquired
		close(q.waiters[0].head)
	}
	if len(q.waiters) > 0 || w.queues[q.key] != q {
		return
	}
	w.idle = append(w.idle, q.key)
	if len(w.idle) <= maxIdle {
		return
	}
	old := w.idle[0]
	w.idle = w.idle[1:]
	oq := w.queues[old]
	delete(w.queues, old)
	if oq.asked && !w.closed {
		for _, s := range w.subs {
			s.send(subOp{channel: releaseChannel(w.c.id, old)})
		}
	}
}

// withdraw removes, in the background, this Client's place in key's
// waiting set at wait start since (ms) from nodes (withdraw.lua), under one
// fresh name for its announcements.
func (c *Client) withdraw(key string, since int64, timeout time.Duration, nodes ...int) {
	order, leases := waitKeys(key)
	name := uuid.NewString()
	for _, i := range nodes {
		c.send(i, withdrawScript, timeout, []string{key, order, leases}, since, c.id, name)
	}
}

// asks reports whether me, the head, asks the nodes now: not once, when
// the head before it left with the key (its Unlock passes me the Client's
// place: see passOn).
func (w *waitQueues) asks(me *waiter) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	placed := me.placed
	me.placed = false
	return !placed
}

// passOn is the Client's next waiter for key, for an Unlock's release to
// pass it the Client's place: its wait start, and a lease that covers its
// current sleep (see sleep) and a node timeout more; "" when none waits.
func (w *waitQueues) passOn(key string, timeout time.Duration) (since string, lease time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queues[key]
	if q == nil || len(q.waiters) == 0 {
		return "", 0
	}
	next := q.waiters[0]
	next.entered = true // it withdraws if it leaves
	now := w.c.cfg.clock.Now()
	left := max(next.due.Sub(now), 0)
	lease = addSat(addSat(left, w.c.driftOf(left)), max(timeout, next.timeout))
	// Until it asks itself, it sleeps no longer than the place lasts: it
	// may be between two sleeps now, about to choose a longer one.
	next.leased = now.Add(lease - next.timeout)
	return strconv.FormatInt(next.since, 10), lease
}

// rearm forgets the releases announced so far, before the head's try: the
// next wake-up needs a quorum of new ones. Releases announced while the
// try is out count: they come after the nodes' answers.
func (w *waitQueues) rearm(me *waiter) {
	q := me.q
	w.mu.Lock()
	defer w.mu.Unlock()
	me.entered, me.leased = true, time.Time{}
	clear(q.free)
	q.nfree = 0
	select {
	case <-q.woken:
	default:
	}
}

// ready subscribes me's key on every node (once per queue) and waits until
// every node confirmed, or a quorum did and as long again has passed, or
// timeout: a node that is down must not hold up the waiter, which without
// confirmations still works, on backoff and the holder's TTL alone. fresh
// reports that this call made the subscriptions: a release before them went
// unheard, so the caller must look at the key again before it sleeps.
func (w *waitQueues) ready(ctx context.Context, me *waiter, timeout time.Duration) (fresh bool) {
	q := me.q
	w.mu.Lock()
	fresh = !q.asked && !w.closed
	q.asked = true
	w.mu.Unlock()
	if fresh {
		for _, s := range w.subs {
			if !s.send(subOp{channel: releaseChannel(w.c.id, q.key), sub: true}) {
				// Not asked of that node: ask again at the next try.
				// Meanwhile the waiter has backoff and the holder's TTL.
				w.mu.Lock()
				q.asked = false
				w.mu.Unlock()
				fresh = false
			}
		}
	}
	start := time.Now() // network waits are real time
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		w.mu.Lock()
		n := q.nsubbed
		w.mu.Unlock()
		switch {
		case n == len(w.c.nodes):
			return fresh
		case n >= w.c.quorum:
			t.Reset(min(time.Until(start.Add(timeout)), time.Since(start)))
		}
		select {
		case <-q.confirmed:
		case <-t.C:
			return fresh
		case <-ctx.Done():
			return fresh
		case <-w.c.life.Done():
			return fresh
		}
	}
}

// sleep waits d on the client's clock, or until me is woken: as the head,
// by a quorum of announced releases; behind it, by becoming the head.
func (w *waitQueues) sleep(ctx context.Context, me *waiter, d time.Duration) error {
	head, woken := me.head, me.q.woken
	if me.atHead() {
		head = nil
	} else {
		woken = nil
	}
	w.mu.Lock()
	now := w.c.cfg.clock.Now()
	if !me.leased.IsZero() {
		d = min(d, max(me.leased.Sub(now), 0))
	}
	me.due = now.Add(d)
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		me.due = time.Time{}
		w.mu.Unlock()
	}()
	t := w.c.cfg.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
	case <-woken:
	case <-head:
	case <-ctx.Done():
		return join(ErrNotAcquired, ctx.Err())
	case <-w.c.life.Done():
		return join(ErrNotAcquired, errClosed)
	}
	return nil
}

// deliver routes node's pub/sub event for channel to its queue: a
// confirmed subscription, or a release's announcement (see
// announcedLocked).
func (w *waitQueues) deliver(node int, channel, payload string, confirmed bool) {
	key, ok := strings.CutPrefix(channel, releasePrefix+w.c.id+":")
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queues[key]
	if q == nil {
		return
	}
	if confirmed {
		if !q.subbed[node] {
			q.subbed[node] = true
			q.nsubbed++
		}
		select {
		case q.confirmed <- struct{}{}:
		default:
		}
		return
	}
	w.announcedLocked(node, q, payload)
}

// heardRelease reads the reply v of one of this Client's releases of key
// on node: a release's announcement, heard first here (see release.lua).
// The node announced it to its first waiter's Client, which may be another;
// the nodes where this Client's own attempt stepped back, for one, may have
// no waiter left, or one younger than this Client's head.
func (w *waitQueues) heardRelease(node int, key string, v any) {
	res, ok := v.([]any)
	if !ok || len(res) != 2 {
		return
	}
	msg, _ := res[1].(string)
	w.mu.Lock()
	defer w.mu.Unlock()
	if q := w.queues[key]; q != nil {
		w.announcedLocked(node, q, msg)
	}
}

// announcedLocked counts node toward the head's wake-up when the release it
// announced ("value since id", or "value" when nobody waits there) frees
// the key for the head: the head is that first waiter, or older, so the
// node would grant it the key now. Once a quorum of nodes did, the head
// wakes. A release is announced twice to its own Client (its reply and
// pub/sub): it counts once, by its released value.
func (w *waitQueues) announcedLocked(node int, q *keyQueue, msg string) {
	value, first, _ := strings.Cut(msg, " ")
	if value == q.heard[node] {
		return
	}
	q.heard[node] = value
	if len(q.waiters) == 0 || !w.frees(first, q.waiters[0]) {
		return
	}
	w.freeLocked(node, q)
}

// freedByRefusal counts node toward the wake-up of key's head, if its wait
// start is since: the head's own try was refused there with the key free
// and the head first (see attempt.freesForCaller), so the node would grant
// it now, as after a release announced to it.
func (w *waitQueues) freedByRefusal(node int, key string, since int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if q := w.queues[key]; q != nil && len(q.waiters) > 0 && q.waiters[0].since == since {
		w.freeLocked(node, q)
	}
}

// freeLocked counts node as one that would grant the key to q's head; once
// a quorum of nodes does, the head wakes.
func (w *waitQueues) freeLocked(node int, q *keyQueue) {
	if q.free[node] {
		return
	}
	q.free[node] = true
	if q.nfree++; q.nfree >= w.c.quorum {
		select {
		case q.woken <- struct{}{}:
		default:
		}
	}
}

// frees reports whether a node whose first waiter is first ("since id", ""
// for none) would grant the key to me: me is that waiter, or older.
func (w *waitQueues) frees(first string, me *waiter) bool {
	if first == "" {
		return true
	}
	s, id, ok := strings.Cut(first, " ")
	if !ok {
		return false // a payload of another form frees nothing
	}
	since, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return false
	}
	return me.since < since || (me.since == since && w.c.id <= id)
}

func (w *waitQueues) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	for _, s := range w.subs {
		s.close()
	}
}
