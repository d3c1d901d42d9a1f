package redlock

import (
	"context"
	"encoding/hex"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"
)

// waitQueues keeps, per key, the local waiters in arrival order and the
// key's pub/sub subscription on every node. Only the head of a queue retries
// on the wire; a release wakes the head, not the whole herd. A queue whose
// last waiter left stays subscribed while it is among the maxIdle most
// recently used: a key that is waited for once is usually waited for again,
// and subscribing anew costs a round trip to every node per wait.
type waitQueues struct {
	c    *Client
	self string        // this Client's id as clientOf reads it
	subs []*subscriber // per node, started on first use

	mu     sync.Mutex // protects queues, idle, closed
	queues map[string]*keyQueue
	idle   []string // keys of queues without waiters, least recently used first
	closed bool
}

// maxIdle bounds the subscribed queues that have no waiter.
const maxIdle = 64

type keyQueue struct {
	key       string
	released  chan struct{} // a release of key was announced (buffered 1)
	confirmed chan struct{} // a node confirmed the subscription (buffered 1)
	granted   chan struct{} // a grant was announced (buffered 1)

	// Guarded by waitQueues.mu:
	waiters   []chan struct{}      // closed when that waiter becomes the head
	asked     bool                 // subscriptions were sent
	subbed    []bool               // nodes that confirmed the subscription
	nsubbed   int                  // how many are true in subbed
	heard     []bool               // nodes that announced a release since the last attempt began
	nheard    int                  // how many are true in heard
	free      int                  // nodes that granted the last attempt, which stepped back from them (see tried)
	held      []string             // per node, the value it last announced a grant of; "" after its release
	peers     map[string]time.Time // other processes' Client ids (clientOf) seen, and when last
	presented time.Time            // when a head last announced itself (see present)
	presentTo int                  // the node it announced itself to
	local     [8]ownRelease        // values this process unlocked lately (ring)
	nlocal    int                  // next slot in local
	holding   bool                 // the last head left holding the lock; its Unlock wakes the next
	shared    time.Time            // when another process was last seen using the key (real time)
	attempt   time.Duration        // how long the last attempt on the wire took
	refused   time.Duration        // how long the last refused attempt took
}

// sharedFor is how long a key counts as used by other processes after the
// last sign of it: a refusal by another value, or another process's release.
const sharedFor = time.Second

func newWaitQueues(c *Client) *waitQueues {
	w := &waitQueues{c: c, queues: make(map[string]*keyQueue), self: hex.EncodeToString(c.id[:])}
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
		n := len(w.c.nodes)
		q = &keyQueue{key: key, released: make(chan struct{}, 1), confirmed: make(chan struct{}, 1),
			granted: make(chan struct{}, 1), subbed: make([]bool, n), heard: make([]bool, n),
			held: make([]string, n), peers: make(map[string]time.Time)}
		w.queues[key] = q
	}
	if len(q.waiters) == 0 {
		w.idle = slices.DeleteFunc(w.idle, func(k string) bool { return k == key })
	}
	q.waiters = append(q.waiters, me)
	if len(q.waiters) == 1 {
		close(me)
	}
	return q, me
}

// leave removes a waiter; the next one becomes the head. holding says the
// waiter leaves with the lock. The last one out makes the queue idle; the
// least recently used idle queue beyond maxIdle is dropped with its
// subscription.
func (w *waitQueues) leave(key string, q *keyQueue, me chan struct{}, holding bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, x := range q.waiters {
		if x == me {
			if i == 0 {
				q.holding = holding
			}
			q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
			if i == 0 && len(q.waiters) > 0 {
				close(q.waiters[0])
			}
			break
		}
	}
	if len(q.waiters) > 0 || w.queues[key] != q {
		return
	}
	w.idle = append(w.idle, key)
	if len(w.idle) <= maxIdle {
		return
	}
	old := w.idle[0]
	w.idle = w.idle[1:]
	oq := w.queues[old]
	delete(w.queues, old)
	if oq.asked && !w.closed {
		for _, s := range w.subs {
			s.send(subOp{channel: releaseChannel(old)})
		}
	}
}

// prepare readies an idle queue of key, if one is subscribed, for an
// attempt that comes before the caller joins it: releases announced from now
// on count toward the wake-up.
func (w *waitQueues) prepare(key string) {
	w.mu.Lock()
	q := w.queues[key]
	w.mu.Unlock()
	if q != nil {
		w.drain(q)
	}
}

// ready subscribes q's key on every node (once per queue) and waits until
// every node confirmed, or a quorum did and as long again has passed, or
// timeout: a node that is down must not hold up the waiter, which without
// confirmations still works, on backoff and the holder's TTL alone. fresh
// reports that this call made the subscriptions: a release before them went
// unheard, so the caller must look at the key again before it sleeps.
func (w *waitQueues) ready(ctx context.Context, q *keyQueue, timeout time.Duration) (fresh bool) {
	w.mu.Lock()
	fresh = !q.asked && !w.closed
	q.asked = true
	w.mu.Unlock()
	if fresh {
		for _, s := range w.subs {
			s.send(subOp{channel: releaseChannel(q.key), sub: true})
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
		}
	}
}

// waiting reports whether waiters for key are queued in this process.
func (w *waitQueues) waiting(key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queues[key]
	return q != nil && len(q.waiters) > 0
}

// tried records an attempt that took d; refused says another value held the
// key on some node (a sign that other processes use it); granted is how
// many nodes granted it before it stepped back: free of holders then, they
// count toward the wake-up as if they had announced a release.
func (w *waitQueues) tried(q *keyQueue, d time.Duration, refused bool, granted int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	q.attempt = d
	q.free = granted
	if refused {
		q.shared, q.refused = time.Now(), d
	}
}

// courtesy is how long a newcomer for key should let other processes go
// first, 0 when none was seen using it lately. Their heads hear a release
// about half a round trip after it and need an attempt to take the key —
// as long as a contended attempt here took, which with a node down includes
// the grace for it; a newcomer in the releasing process would be there
// first every time (measured: two holds in three went back to the previous
// holder among six processes with a node down), and the others would
// starve.
func (w *waitQueues) courtesy(key string) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queues[key]
	if q == nil || q.shared.IsZero() || time.Since(q.shared) > sharedFor {
		return 0
	}
	return max(2*q.attempt, q.refused, time.Millisecond)
}

// holding reports whether the head before this one left holding the lock.
func (w *waitQueues) holding(q *keyQueue) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return q.holding
}

// drain forgets announced releases and grants before a new attempt.
func (w *waitQueues) drain(q *keyQueue) {
	w.mu.Lock()
	clear(q.held)
	q.holding = false
	w.mu.Unlock()
	w.rearm(q)
}

// rearm forgets announced releases: the next wake-up needs a quorum of new
// ones.
func (w *waitQueues) rearm(q *keyQueue) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.rearmLocked(q)
}

func (w *waitQueues) rearmLocked(q *keyQueue) {
	clear(q.heard)
	q.nheard = 0
	q.free = 0
	select {
	case <-q.released:
	default:
	}
}

// letPass is for a head that a release woke: when another process holds
// the key (see takenLocked) it rearms, so that the head waits for that hold's
// release, and reports true. Both under one lock: a release announced
// between the look and the rearm would be forgotten, and the head sleep
// until its backoff on a free key.
func (w *waitQueues) letPass(q *keyQueue) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.takenLocked(q) {
		return false
	}
	w.rearmLocked(q)
	return true
}

// spread is how long a head that a release woke waits before it asks:
// heads in other processes were woken by the same release, and if all
// asked at once they would split the nodes' votes, or all but one be
// refused, for a few dozen commands per hold. Spread at random over a few
// round trips to a quorum, the first to ask is usually done — its grants
// announced — before the next would start, and the others let it pass (see
// letPass). The longer a head has waited (since), the shorter its spread, so
// that across processes the oldest waiters tend to go first. 0 when no
// other process was seen using the key lately: a handoff within one
// process is not slowed.
func (w *waitQueues) spread(q *keyQueue, since time.Time) time.Duration {
	rtt := time.Duration(w.c.rtt.Load())
	w.mu.Lock()
	shared, peers := q.shared, w.peersLocked(q)
	w.mu.Unlock()
	if shared.IsZero() || time.Since(shared) > sharedFor || rtt <= 0 || peers == 0 {
		return 0
	}
	s := spreadRTTs * time.Duration(1+peers) * rtt
	age, horizon := time.Since(since), ageHorizon*s
	// In floating point: rand.N(s) * horizon overflows int64 once s passes
	// about 1.5s (50ms round trips and 30 contending processes).
	return time.Duration(float64(rand.N(s)) * float64(horizon) / float64(horizon+max(age, 0)))
}

const (
	spreadRTTs = 1 // the spread, in round trips to a quorum per contending process
	ageHorizon = 4 // a head that waited this many spreads gets half of one
)

// takenLocked reports whether, by the nodes' announcements, one value was granted
// by a quorum of nodes and not released since: another process holds the
// key. Only a real hold gets a quorum's grants (a contender that lost a
// split vote steps back unannounced, with fewer), and a node that is down
// or unheard only makes this report false, never wrongly true. A node
// holds one value at a time and announces in order, so its latest grant
// alone counts: a hold that expired or stepped back unannounced is
// forgotten at the next grant there.
func (w *waitQueues) takenLocked(q *keyQueue) bool {
	for _, v := range q.held {
		if v != "" && w.heldBy(q, v) >= w.c.quorum {
			return true
		}
	}
	return false
}

// heldBy is how many nodes last announced a grant of value.
func (w *waitQueues) heldBy(q *keyQueue, value string) int {
	n := 0
	for _, v := range q.held {
		if v == value {
			n++
		}
	}
	return n
}

// enough is how many nodes' release announcements wake the head: a
// quorum, less the nodes whose subscription never confirmed (a node that is
// down cannot announce).
func (w *waitQueues) enough(q *keyQueue) int {
	return max(1, w.c.quorum-(len(w.c.nodes)-q.nsubbed))
}

func (q *keyQueue) signal() {
	select {
	case q.released <- struct{}{}:
	default:
	}
}

// ownRelease is a release by this process's Unlock, and whether wake
// deferred the local head's wake-up for it.
type ownRelease struct {
	value    string
	deferred bool
}

// releasing notes that this process is about to release value and
// reports whether wake is to defer the local head's wake-up (see wake).
// Deferred, the nodes' announcements of the release wake the head like
// another process's; else wake tells the head at once and they are
// ignored: they come after, and counted they would wake the next head in
// the middle of the hold just taken, for an ask sure to be refused.
func (w *waitQueues) releasing(key, value string) (deferred bool) {
	rtt := time.Duration(w.c.rtt.Load())
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queues[key]
	if q == nil {
		return false
	}
	deferred = w.peersLocked(q) > 0 && q.nsubbed >= w.c.quorum && rtt > 0
	q.local[q.nlocal%len(q.local)] = ownRelease{value: value, deferred: deferred}
	q.nlocal++
	return deferred
}

// ownLocked reports whether value is one of this process's releases, and
// whether its wake-up was deferred.
func (q *keyQueue) ownLocked(value string) (own, deferred bool) {
	for _, r := range q.local {
		if r.value == value && value != "" {
			return true, r.deferred
		}
	}
	return false, false
}

// wake tells the local head of key's queue that this process released
// key. When other processes wait for the key too, their heads hear of the
// release from the nodes, later than this one would from wake: woken now,
// the local head would take the key back every time and the others starve.
// So then (deferred, as releasing decided) the local head hears of it from
// the nodes like everyone else, and wake only makes sure of it, a few round
// trips later.
func (w *waitQueues) wake(key string, deferred bool) {
	rtt := time.Duration(w.c.rtt.Load())
	w.mu.Lock()
	q := w.queues[key]
	w.mu.Unlock()
	switch {
	case q == nil:
	case deferred:
		time.AfterFunc(max(wakeRTTs*rtt, time.Millisecond), q.signal)
	default:
		q.signal()
	}
}

// wakeRTTs is how many round trips after its own release a local head is
// woken at the latest, when the nodes' announcements were not heard.
const wakeRTTs = 4

// deliver routes node's pub/sub event for channel to its queue. A release
// wakes the head once enough nodes announced one, whatever values they
// released (the holder's, a contender's that stepped back, this process's
// own failed attempt): woken by the first node alone, the head would find
// the key still held on the others. Enough is a quorum, less the nodes that
// never confirmed the subscription (a node that is down cannot announce).
// Releases by this process's own Unlock are skipped unless its wake-up
// was deferred: wake told the head (see releasing).
func (w *waitQueues) deliver(node int, channel, value string, confirmed bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	key, ok := strings.CutPrefix(channel, releasePrefix)
	if !ok {
		return
	}
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
	if id, ok := strings.CutPrefix(value, "?"); ok {
		if w.peerLocked(q, id) {
			q.shared = time.Now()
		}
		return
	}
	if v, ok := strings.CutPrefix(value, "+"); ok {
		w.peerLocked(q, v)
		w.grantedLocked(q, node, v)
		return
	}
	w.peerLocked(q, value)
	if q.held[node] == value {
		q.held[node] = ""
	}
	own, deferred := q.ownLocked(value)
	switch {
	case !own:
		q.shared = time.Now() // another process's release
	case !deferred:
		return // wake told the head at once
	}
	if !q.heard[node] {
		q.heard[node] = true
		q.nheard++
	}
	// A node that dies after it confirmed the subscription still counts in
	// enough; the nodes that granted the head's last attempt are free too.
	if q.nheard >= w.enough(q) || q.nheard+q.free >= w.c.quorum {
		q.signal()
	}
}

// peerLocked notes the Client that made value, unless it is this one, and
// reports whether it is another.
func (w *waitQueues) peerLocked(q *keyQueue, value string) bool {
	id := clientOf(value)
	if id == w.self {
		return false
	}
	now := time.Now()
	if len(q.peers) >= maxPeers {
		for p, seen := range q.peers {
			if now.Sub(seen) > sharedFor {
				delete(q.peers, p)
			}
		}
		if len(q.peers) >= maxPeers {
			return true
		}
	}
	q.peers[id] = now
	return true
}

// present tells the other processes that a head in this one waits for q's
// key: they would not know otherwise while it lets their holds pass, and
// they need to, to spread their own attempts and to leave it its turn (see
// spread, wake). One PUBLISH ("?" and this Client's id) to one node, a
// different one each time, at most every presentEvery.
func (w *waitQueues) present(q *keyQueue, timeout time.Duration) {
	c := w.c
	w.mu.Lock()
	if w.closed || time.Since(q.presented) < presentEvery {
		w.mu.Unlock()
		return
	}
	q.presented = time.Now()
	q.presentTo = (q.presentTo + 1) % len(c.nodes)
	node := c.nodes[q.presentTo].rdb
	w.mu.Unlock()
	c.goBackground(func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		select {
		case <-c.closing: // Close came after the look at closed above
			return
		default:
		}
		_ = node.Publish(ctx, releaseChannel(q.key), "?"+w.self).Err()
	})
}

// presentEvery is how often a waiting head announces itself.
const presentEvery = sharedFor / 4

// maxPeers bounds the other processes a queue keeps track of.
const maxPeers = 256

// peersLocked is how many other processes used q's key lately.
func (w *waitQueues) peersLocked(q *keyQueue) int {
	n := 0
	for _, seen := range q.peers {
		if time.Since(seen) <= sharedFor {
			n++
		}
	}
	return n
}

// grantedLocked records node's announcement that it granted value: the
// value it held before there, if any, is gone.
func (w *waitQueues) grantedLocked(q *keyQueue, node int, value string) {
	if q.held[node] == value {
		return
	}
	q.held[node] = value
	if w.heldBy(q, value) >= w.c.quorum {
		select {
		case q.granted <- struct{}{}:
		default:
		}
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
