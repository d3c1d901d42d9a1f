package redlock

import (
	"context"
	"encoding/hex"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
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
	waiters    []chan struct{}      // closed when that waiter becomes the head
	asked      bool                 // subscriptions were sent
	subbed     []bool               // nodes that confirmed the subscription
	nsubbed    int                  // how many are true in subbed
	heard      []bool               // nodes that announced a release since the last attempt began
	nheard     int                  // how many are true in heard
	fresh      []bool               // of those, nodes that announced a release not stale (see stale)
	nfresh     int                  // how many are true in fresh
	free       int                  // nodes that granted the last attempt, which stepped back from them (see tried)
	held       []string             // per node, the value it last announced a grant of; "" after its release
	heldAt     []time.Time          // per node, when that grant was heard (real time)
	heldUntil  []time.Time          // per node, when its TTL ends, as announced
	peers      map[string]time.Time // other processes' Client ids (clientOf) seen, and when last
	present    map[string]time.Time // of those, the ones whose head announced it waits, and when last
	next       string               // the Client whose turn it is, as the releases heard since the last rearm named it
	named      []namedBy            // the releases first heard since the last rearm
	stale      [maxNamed]string     // releases heard from enough nodes before a rearm (ring): after it they name nobody, nor wake (see deliver)
	nstale     int                  // next slot in stale
	presented  time.Time            // when a head last announced itself (see present)
	presenter  *time.Timer          // announces again while anyone waits (see represent); nil when none
	presentFor time.Duration        // the node timeout for those announcements
	presentTo  int                  // the node it announced itself to
	local      [8]ownRelease        // values this process unlocked lately (ring)
	nlocal     int                  // next slot in local
	holding    bool                 // the last head left holding the lock; its Unlock wakes the next
	ownUntil   time.Time            // this process holds the key until then (client's clock), zero once released or handed on
	shared     time.Time            // when another process was last seen using the key (real time)
	offer      *handoff             // the head's offer to be handed the key (see handoff)
	passes     int                  // holds handed on in a row within this process (see claim)
	attempt    time.Duration        // how long the last attempt on the wire took
	refused    time.Duration        // how long the last refused attempt took
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
			granted: make(chan struct{}, 1), subbed: make([]bool, n), heard: make([]bool, n), fresh: make([]bool, n),
			held: make([]string, n), heldAt: make([]time.Time, n), heldUntil: make([]time.Time, n), peers: make(map[string]time.Time), present: make(map[string]time.Time)}
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

// leave removes a waiter; the next one becomes the head. until is the
// validity end of the lock it leaves with, zero for none. The last one out makes the queue idle; the
// least recently used idle queue beyond maxIdle is dropped with its
// subscription.
func (w *waitQueues) leave(key string, q *keyQueue, me chan struct{}, until time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, x := range q.waiters {
		if x == me {
			if i == 0 {
				q.holding = !until.IsZero()
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
	// Releases announced while the attempt was out were counted without
	// these nodes (free was 0 from the rearm that began it): the last
	// announcements of the release that woke the head come then, stale,
	// and with the nodes just found free they make a quorum (see deliver).
	// Looked at only at a delivery, that wake-up would be lost, and the
	// head sleep its backoff on a free key.
	w.wakeLocked(q)
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

// drain forgets announced releases before a new attempt. The announced
// grants stay: a grant is over at its release or its TTL (see heldBy), and
// one that this attempt loses to is announced after it; forgotten, the
// attempt's next backoff would end in a blind ask.
func (w *waitQueues) drain(q *keyQueue) {
	w.mu.Lock()
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
	clear(q.fresh)
	q.nfresh = 0
	q.free = 0
	q.next = ""
	for _, n := range q.named {
		if n.nodes >= w.enough(q) {
			q.stale[q.nstale%len(q.stale)] = n.value
			q.nstale++
		}
	}
	q.named = q.named[:0]
	select {
	case <-q.released:
	default:
	}
}

// letPass is for a head that a release woke, or whose backoff ran out:
// when another process holds the key (see takenLocked; life is the
// waiter's own TTL) it rearms, so that the head waits for that hold's
// release, and reports true. Both under one lock: a release announced
// between the look and the rearm would be forgotten, and the head sleep
// until its backoff on a free key.
func (w *waitQueues) letPass(q *keyQueue, life time.Duration) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.takenLocked(q, life) {
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
// by a quorum of nodes and not released since, nor past its TTL as
// announced or life (the waiter's own TTL), whichever is shorter: another
// process holds the key (this one's own holds are not: its Unlock hands
// the key on, or wakes the head). The TTL bounds a grant whose release went
// unannounced (a holder that crashed, a message lost), and life one whose
// announced TTL was forged. Only a real hold gets a quorum's grants (a contender that lost a
// split vote steps back unannounced, with fewer), and a node that is down
// or unheard only makes this report false, never wrongly true. A node
// holds one value at a time and announces in order, so its latest grant
// alone counts: a hold that expired or stepped back unannounced is
// forgotten at the next grant there.
func (w *waitQueues) takenLocked(q *keyQueue, life time.Duration) bool {
	_, _, ok := w.takenOnLocked(q, life)
	return ok
}

// takenOn returns a node that announced the grant (of value) by which, as
// takenLocked sees it, another process holds q's key; false if none does.
func (w *waitQueues) takenOn(q *keyQueue, life time.Duration) (node int, value string, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.takenOnLocked(q, life)
}

func (w *waitQueues) takenOnLocked(q *keyQueue, life time.Duration) (node int, value string, ok bool) {
	now := time.Now()
	for i, v := range q.held {
		if v != "" && clientOf(v) != w.self && w.heldBy(q, v, now, life) >= w.c.quorum {
			return i, v, true
		}
	}
	return 0, "", false
}

// forgetHeld forgets the announced grants of value: a read of a node that
// announced one found the key gone, so that hold is over (or its release
// went unheard).
func (w *waitQueues) forgetHeld(q *keyQueue, value string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, h := range q.held {
		if h == value {
			q.held[i] = ""
		}
	}
}

// heldBy is how many nodes last announced a grant of value that is not
// over at now, nor life after it was announced (life <= 0: no such bound).
func (w *waitQueues) heldBy(q *keyQueue, value string, now time.Time, life time.Duration) int {
	n := 0
	for i, v := range q.held {
		until := q.heldUntil[i]
		if end := q.heldAt[i].Add(life); life > 0 && end.Before(until) {
			until = end
		}
		if v == value && now.Before(until) {
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

// namedBy counts the nodes that announced the release of value.
type namedBy struct {
	value string
	nodes int
}

// maxNamed bounds the releases a queue counts between rearms.
const maxNamed = 16

// ownRelease is a release by this process's Unlock, and whether wake
// deferred the local head's wake-up for it.
type ownRelease struct {
	value    string
	deferred bool
	heard    int  // nodes that announced it (counted when deferred)
	woken    bool // wake's fallback fired for it
}

// releasing notes that this process is about to release value and
// reports whether wake is to defer the local head's wake-up (see wake),
// and which Client's turn it is next: the release names it to every
// waiter (see successorLocked), "" for none. Deferred, the nodes'
// announcements of the release wake the head like another process's; else
// wake tells the head at once and they are ignored: they come after, and
// counted they would wake the next head in the middle of the hold just
// taken, for an ask sure to be refused.
func (w *waitQueues) releasing(key, value string, handedOn bool) (deferred bool, next string) {
	rtt := time.Duration(w.c.rtt.Load())
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queues[key]
	if q == nil {
		return false, ""
	}
	deferred = w.peersLocked(q) > 0 && q.nsubbed >= w.c.quorum && rtt > 0
	if deferred {
		next = w.successorLocked(q)
	}
	q.local[q.nlocal%len(q.local)] = ownRelease{value: value, deferred: deferred}
	q.nlocal++
	if !handedOn { // else the key is held on, by this process
		q.passes = 0
		q.ownUntil = time.Time{}
	}
	return deferred, next
}

// successorLocked is the Client whose turn it is after this one's hold of
// q's key: of the other processes whose heads announced lately that they
// wait (see present), the first after this Client's id in the order of the
// ids, going round; "" when none did. Each release names the next in the
// round, so that the processes take turns, one ask per release, instead of
// all asking at once and splitting the nodes' votes. A name is a hint: a
// Client named that no longer waits only costs the others their yield
// (see Client.stagger).
func (w *waitQueues) successorLocked(q *keyQueue) string {
	var first, next string
	for id, seen := range q.present {
		if time.Since(seen) > sharedFor {
			delete(q.present, id)
			continue
		}
		if first == "" || id < first {
			first = id
		}
		if id > w.self && (next == "" || id < next) {
			next = id
		}
	}
	if next == "" {
		return first
	}
	return next
}

// acquired notes that this process holds key until then (the client's
// clock), for ownBusy: by whichever path it got it.
func (w *waitQueues) acquired(key string, until time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if q := w.queues[key]; q != nil {
		q.ownUntil = until
	}
}

// ownBusy reports whether this process holds q's key, by its last hold's
// validity, or released it so lately that the nodes' announcements are
// still to come (a deferred wake-up, see wake): either way its head will
// be handed the key or woken, and must not ask meanwhile — it would take
// the key from the process whose turn the release names, before that
// process even heard of it.
func (w *waitQueues) ownBusy(q *keyQueue) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.c.cfg.clock.Now().Before(q.ownUntil) {
		return true
	}
	if q.nlocal == 0 {
		return false
	}
	r := q.local[(q.nlocal-1)%len(q.local)]
	return r.deferred && r.heard < w.enough(q) && !r.woken
}

// named is the Client whose turn the releases heard since the last rearm
// named, "" for none, and whether it is this one.
func (w *waitQueues) named(q *keyQueue) (next string, mine bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return q.next, q.next != "" && q.next == w.self
}

// ownRelease is this process's release of value, nil if none lately.
func (q *keyQueue) ownRelease(value string) *ownRelease {
	for i := range q.local {
		if r := &q.local[i]; r.value == value && value != "" {
			return r
		}
	}
	return nil
}

// wake tells the local head of key's queue that this process released
// key. When other processes wait for the key too, their heads hear of the
// release from the nodes, later than this one would from wake: woken now,
// the local head would take the key back every time and the others starve.
// So then (deferred, as releasing decided) the local head hears of it from
// the nodes like everyone else, and wake only makes sure of it, a few round
// trips later, if not enough nodes announced the release of value by then.
func (w *waitQueues) wake(key, value string, deferred bool) {
	rtt := time.Duration(w.c.rtt.Load())
	w.mu.Lock()
	q := w.queues[key]
	w.mu.Unlock()
	switch {
	case q == nil:
	case deferred:
		time.AfterFunc(max(wakeRTTs*rtt, yieldAtLeast), func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			if r := q.ownRelease(value); r == nil || r.heard < w.enough(q) {
				if r != nil {
					r.woken = true
				}
				q.signal()
			}
		})
	default:
		q.signal()
	}
}

// wakeRTTs is how many round trips after its own release a local head is
// woken at the latest, when the nodes' announcements were not heard, and at
// least yieldAtLeast: as long as another process's head yields to the
// process named (the announcements come late on a loaded machine, and a
// head woken early asks into that process's attempt).
const wakeRTTs = yieldRTTs

// deliver routes node's pub/sub event for channel to its queue. A release
// wakes the head once enough nodes announced one, whatever values they
// released (the holder's, a transfer's that stepped back, this process's
// own): woken by the first node alone, the head would find the key still
// held on the others. Enough is a quorum, less the nodes that never
// confirmed the subscription (a node that is down cannot announce). A
// release heard from enough nodes before the last rearm is stale (see
// keyQueue.stale): the rest of its announcements neither name whose turn
// it is nor wake the head, unless with the nodes its last attempt found
// free. One heard from fewer is not: it may be the release of the hold
// that the rearm let pass, announced on the other nodes after it.
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
			if len(q.present) >= maxPeers {
				maps.DeleteFunc(q.present, func(_ string, seen time.Time) bool { return q.shared.Sub(seen) > sharedFor })
			}
			if len(q.present) < maxPeers {
				q.present[clientOf(id)] = q.shared
			}
		}
		return
	}
	if grant, ok := strings.CutPrefix(value, "+"); ok {
		v, ttl := parseGrant(grant)
		w.peerLocked(q, v)
		w.grantedLocked(q, node, v, ttl)
		return
	}
	value, next, _ := strings.Cut(value, " ") // the release names the next Client, if any
	w.peerLocked(q, value)
	// The grant node announced last is over if it was value's, or another
	// of the same Client's: a transfer sets a value unannounced (see
	// transfer.lua), and the Client's last release ends the run. Another
	// Client's grant is not: its announcement came after this release on
	// the node (a node grants only a free key), unless forged.
	if h := q.held[node]; h != "" && (h == value || clientOf(h) == clientOf(value)) {
		q.held[node] = ""
	}
	r := q.ownRelease(value)
	switch {
	case r == nil:
		q.shared = time.Now() // another process's release
	case !r.deferred:
		return // wake told the head at once
	default:
		r.heard++
	}
	if !q.heard[node] {
		q.heard[node] = true
		q.nheard++
	}
	stale := slices.Contains(q.stale[:], value)
	if !stale && !q.fresh[node] {
		q.fresh[node] = true
		q.nfresh++
	}
	// Whose turn it is: what the first release heard from enough nodes
	// since the rearm named. Counted per released value, and not for a
	// stale one: the last announcements of an earlier release come after
	// the rearm, from the slower nodes, and must not name anyone — with a
	// node down, they can be enough on their own, and named, the process
	// that took the key on that release asks again while it holds it.
	if !stale {
		i := slices.IndexFunc(q.named, func(n namedBy) bool { return n.value == value })
		if i < 0 && len(q.named) < maxNamed {
			q.named = append(q.named, namedBy{value: value})
			i = len(q.named) - 1
		}
		if i >= 0 {
			q.named[i].nodes++
			if q.next == "" && q.named[i].nodes >= w.enough(q) {
				q.next = next
			}
		}
	}
	w.wakeLocked(q)
}

// wakeLocked wakes q's head when the releases heard since the last rearm
// free the key: enough nodes announced a release that is not stale (a node
// that dies after it confirmed the subscription still counts in enough),
// or the nodes that announced any, with those that granted the head's last
// attempt, make a quorum. Stale releases count only with those: on their
// own they woke a head before, for a release whose next holder may be
// still to announce its grants (then the head would ask into its hold).
func (w *waitQueues) wakeLocked(q *keyQueue) {
	if q.nfresh >= w.enough(q) || (q.free > 0 && q.nheard+q.free >= w.c.quorum) {
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
	q.presentFor = timeout
	if q.presenter == nil && !w.closed {
		q.presenter = time.AfterFunc(presentEvery, func() { w.represent(q) })
	}
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

// represent announces again that q's head waits, every presentEvery while
// anyone waits: a head sleeps as long as its backoff (a fixed one of
// seconds, say), and the others forget a process sharedFor after its last
// presence — they would neither name it (successorLocked) nor bound their
// hand-offs for it (claim).
func (w *waitQueues) represent(q *keyQueue) {
	w.mu.Lock()
	if w.closed || len(q.waiters) == 0 {
		q.presenter = nil
		w.mu.Unlock()
		return
	}
	q.presenter.Reset(presentEvery)
	timeout := q.presentFor
	w.mu.Unlock()
	w.present(q, timeout)
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

// grantedLocked records node's announcement that it granted value for
// ttl: the value it held before there, if any, is gone.
func (w *waitQueues) grantedLocked(q *keyQueue, node int, value string, ttl time.Duration) {
	if q.held[node] == value {
		return
	}
	now := time.Now()
	q.held[node], q.heldAt[node], q.heldUntil[node] = value, now, now.Add(ttl)
	if w.heldBy(q, value, now, 0) >= w.c.quorum {
		select {
		case q.granted <- struct{}{}:
		default:
		}
	}
}

// parseGrant splits a grant's announcement ("+" cut off): the value, a
// space and the TTL in milliseconds, as acquire.lua publishes it. A TTL
// missing or unreadable counts as sharedFor.
func parseGrant(grant string) (value string, ttl time.Duration) {
	value, ms, _ := strings.Cut(grant, " ")
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil || n <= 0 || n > int64(maxGrantTTL/time.Millisecond) {
		return value, sharedFor
	}
	return value, time.Duration(n) * time.Millisecond
}

// maxGrantTTL bounds an announced TTL (a Duration overflows past 292 years).
const maxGrantTTL = 24 * time.Hour

// A handoff is a head's standing offer to be handed the key by this
// process's holder: the holder's Unlock, instead of a release that the
// head would hear of and then an attempt of its own (two round trips, and
// the other processes' heads woken for nothing), makes the head's attempt
// itself as a transfer (transfer.lua), which releases the old hold and
// asks for the new in one round trip. The attempt is the head's: its TTL
// and options, and it is cancelled when the head leaves (its ctx ends, or
// the client closes). While other processes wait, a holder hands on at most
// maxPasses holds in a row (see claim), then releases for the next
// process's turn.
type handoff struct {
	ttl   time.Duration
	lc    lockConfig
	ready chan struct{} // closed when res is set
	res   handoffResult

	// Guarded by waitQueues.mu:
	claimed   bool               // a holder took the offer and makes the attempt
	delivered bool               // res is set
	withdrawn bool               // the head left before res: the holder undoes a hold it got
	cancel    context.CancelFunc // ends the claimed attempt's ctx
}

// handoffResult is what the attempt made for a head returned.
type handoffResult struct {
	l   *Lock
	f   failure
	err error
}

// maxPasses bounds the holds a process hands on in a row to its own
// waiters while other processes wait for the key: a cohort of up to
// 1+maxPasses holds, then the next process's turn (see successorLocked).
const maxPasses = 3

// offer makes h the head's offer for q's key.
func (w *waitQueues) offer(q *keyQueue, ttl time.Duration, lc lockConfig) *handoff {
	h := &handoff{ttl: ttl, lc: lc, ready: make(chan struct{})}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		q.offer = h
	}
	return h
}

// unoffer takes back h before the head asks itself, and reports whether a
// holder claimed it first: then the head waits for its result instead.
func (w *waitQueues) unoffer(q *keyQueue, h *handoff) (claimed bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if q.offer == h {
		q.offer = nil
	}
	return h.claimed
}

// claim takes the offer of the head waiting for key, if there is one and
// this process may hand the key on once more (see maxPasses); nil if not.
// The attempt's ctx ends when the head leaves (see withdraw); the caller
// cancels it when done. A hand-off claimed counts as in flight (Close
// waits for it) until the caller's done: the hold it makes must be
// delivered, or undone, before the batchers stop.
func (w *waitQueues) claim(key string) (*handoff, context.Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queues[key]
	if q == nil || q.offer == nil || w.closed || (q.passes >= maxPasses && w.peersLocked(q) > 0) {
		return nil, nil
	}
	h := q.offer
	ctx, cancel := context.WithCancel(context.Background())
	q.offer, h.claimed, h.cancel = nil, true, cancel
	w.c.inflight.add(1) // under mu, where closed is checked: Close waits for it
	q.passes++
	q.ownUntil = time.Time{}
	return h, ctx
}

// handed gives h its result and reports whether its head takes it; false
// when the head left meanwhile (the caller then unlocks a hold it got).
//
// A hold handed over counts as in flight until its head takes it (take) or
// undoes it (withdraw, then the head's Unlock): the caller's own count ends
// when it returns, and a head that sees Close before the result would
// otherwise unlock it after Close stopped the batchers, and leave its grants
// behind.
func (w *waitQueues) handed(h *handoff, r handoffResult) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if h.withdrawn {
		return false
	}
	if r.l != nil {
		w.c.inflight.add(1)
	}
	h.res, h.delivered = r, true
	close(h.ready)
	return true
}

// take is the head taking its delivered result: the hold in it is the
// caller's now, and no longer in flight (see handed).
func (w *waitQueues) take(h *handoff) handoffResult {
	if h.res.l != nil {
		w.c.inflight.done()
	}
	return h.res
}

// withdraw is for a head that leaves (with or without the lock) while h
// may be outstanding: it takes the offer back, and unlocks the hold of a
// result that was delivered but not taken, whose in-flight count (see
// handed) ends once that Unlock's releases are queued; a claimed offer whose
// result is still to come is marked withdrawn, and its holder undoes it
// (see handed).
func (w *waitQueues) withdraw(ctx context.Context, q *keyQueue, h *handoff) {
	if r := w.untaken(q, h); r != nil && r.l != nil {
		_ = r.l.Unlock(ctx) // handed a hold after all: not this caller's
		w.c.inflight.done()
	}
}

func (w *waitQueues) untaken(q *keyQueue, h *handoff) *handoffResult {
	w.mu.Lock()
	defer w.mu.Unlock()
	if q.offer == h {
		q.offer = nil
	}
	switch {
	case h.claimed && !h.delivered:
		h.withdrawn = true
		h.cancel()
	case h.delivered:
		return &h.res
	}
	return nil
}

func (w *waitQueues) close() {
	w.mu.Lock()
	w.closed = true
	for _, q := range w.queues {
		if q.presenter != nil {
			q.presenter.Stop()
			q.presenter = nil
		}
	}
	w.mu.Unlock()
	for _, s := range w.subs {
		s.close()
	}
}
