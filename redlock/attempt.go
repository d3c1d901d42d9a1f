package redlock

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

// An attempt is one acquisition in flight on all nodes. Its per-node calls
// outlive the caller's decision: a node that answers after the outcome was
// decided finishes its own part — heal a lagging counter after a success,
// release its grant after a failure or an Unlock — so that no grant is ever
// left behind and no caller waits on a dead node.

type attemptState int

const (
	undecided attemptState = iota
	acquired               // a Lock was returned; late nodes heal their counter
	abandoned              // failed; late nodes release their grant
	unlocked               // acquired, then unlocked; late nodes heal, and Unlock's release removes their grant
)

// maxReasks bounds how often the winner of a split vote asks again the
// nodes that contenders held (see tally.wins), a round trip apart. A
// contender saw the same refusals, and steps back as soon as it decides: one
// re-ask after a round trip finds its node free; the other two are for a
// contender that decided late, by at most two more of the winner's round
// trips. Past that the contender is not a peer following the rule (a
// foreign value, a stuck client): the key is left to its TTL, and the
// winner to its retry strategy.
const maxReasks = 3

// reply is one node's answer to an acquire call.
type reply struct {
	node      int
	counter   uint64        // the node's fence counter (after its INCR when granted)
	holderTTL time.Duration // refused: what the holder's key has left
	holder    string        // refused: the value that holds the key
	first     string        // refused: the node's first waiter after the refusal ("since id", "" for none)
	err       error
	granted   bool
}

type attempt struct {
	c       *Client
	value   string
	ttl     time.Duration
	start   time.Time  // on the client's clock: validity counts from here
	keys    []string   // the scripts' KEYS: lock key, fence counter, waiting order, leases
	args    []any      // acquire.lua's ARGV: value, ttl, wait start, Client id, lease
	replies chan reply // every answer, for the deciding caller (see startAttempt); nil once compacted
	trace   OpTrace    // the acquire call's trace, if traced (observe.go)

	mu       sync.Mutex // protects the fields below
	state    attemptState
	token    uint64
	answered []bool        // node i answered an acquire call
	latest   []reply       // node i's latest answer, valid when answered[i]; nil once compacted
	refused  []int         // compacted: the nodes whose latest answer was a refusal
	pending  int           // acquire calls not yet answered and settled
	settled  chan struct{} // closed when pending is 0 after a decision
	deadline time.Time     // real time by which every acquire call completes
	skipped  []bool        // unlocked: node i refused, and Unlock's release left it out; nil once compacted
	longest  time.Duration // the longest TTL the hold was given: ttl, or an Extend's
}

// holdValue is a fresh random value (a UUID) whose leading bits are since,
// the time its caller began to wait, in milliseconds on the client's clock
// (the UUID version 7 layout): values sort by how long their callers have
// waited, which is how a split vote between equally placed contenders goes
// to the oldest. Its last four bytes are the Client's id; 42 random bits
// remain. The waiting set orders waiters by the same two (see waiter).
func holdValue(since time.Time, id string) string {
	u := uuid.New()
	ms := uint64(since.UnixMilli())
	for i := range 6 {
		u[i] = byte(ms >> (40 - 8*i))
	}
	u[6] = u[6]&0x0f | 0x70               // version 7
	_, _ = hex.Decode(u[12:], []byte(id)) // 8 hex digits, made by New
	return u.String()
}

// startAttempt sends the acquire script to every node. A refused caller
// keeps its place in the key's waiting set for sleep (capped by the
// holder's TTL) and slack more; 0 and 0 for a caller that does not wait
// (see acquire.lua).
func (c *Client) startAttempt(key string, ttl time.Duration, since time.Time, sleep, slack time.Duration, trace OpTrace) *attempt {
	n := len(c.nodes)
	order, leases := waitKeys(key)
	value := holdValue(since, c.id)
	a := &attempt{
		c:     c,
		value: value,
		ttl:   ttl,
		start: c.cfg.clock.Now(),
		keys:  []string{key, FenceKey(key), order, leases},
		args:  []any{value, ttl.Milliseconds(), since.UnixMilli(), c.id, sleep.Milliseconds(), slack.Milliseconds()},
		// One answer per node at most is ever unread: a node is asked
		// again (a split vote's re-ask) only once its answer was read
		// (tally.refusers), so answer never blocks. A held Lock keeps
		// this buffer: n, not one per call an attempt may make.
		replies:  make(chan reply, n),
		answered: make([]bool, n),
		latest:   make([]reply, n),
		settled:  make(chan struct{}),
		skipped:  make([]bool, n),
		longest:  ttl,
		trace:    trace,
	}
	a.ask(c.all)
	return a
}

// key is the lock key; timeout each node call's deadline.
func (a *attempt) key() string            { return a.keys[0] }
func (a *attempt) timeout() time.Duration { return a.c.nodeTimeout(a.ttl) }

// isClosed reports whether ch is closed (it is never sent on).
func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// lockKey is the lock key as a script's KEYS; fenceKey the fence
// counter's; releaseKeys release.lua's (the lock key and its waiting set).
func (a *attempt) lockKey() []string     { return a.keys[:1] }
func (a *attempt) fenceKey() []string    { return a.keys[1:2] }
func (a *attempt) releaseKeys() []string { return []string{a.keys[0], a.keys[2], a.keys[3]} }

// ask sends the acquire script to nodes (all of them first; a split vote's
// winner asks the contenders' nodes again).
func (a *attempt) ask(nodes []int) {
	a.mu.Lock()
	a.pending += len(nodes)
	a.deadline = time.Now().Add(a.timeout()) // network waits are real time
	a.mu.Unlock()
	g := a.c.newGroup(a, a.timeout(), nodes, acquireScript, a.keys, a.args...)
	g.trace = a.trace
	g.start()
}

// answer records node i's reply to an acquire call (the attempt is the sink
// of its groups). It runs on a worker or the deadline: it must not block.
func (a *attempt) answer(i int, v any, err error) {
	r := a.parse(i, v, err)
	a.mu.Lock()
	a.answered[i], a.latest[i] = true, r
	state, token := a.state, a.token
	replies := a.replies // this call is pending: not compacted
	a.mu.Unlock()
	replies <- r // buffered for one unread answer per node: never blocks
	if a.freesForCaller(r) {
		a.c.waiters.freedByRefusal(i, a.key(), a.args[2].(int64))
	}
	a.settle(r, state, token)
	// Settled only once this answer's release or heal is queued: whoever
	// waits for settled (see fail) may let Close stop the batchers next,
	// and what settle reads may be compacted then.
	a.mu.Lock()
	a.pending--
	a.maybeSettleLocked()
	a.mu.Unlock()
}

// freesForCaller reports whether r is a refusal after which the node would
// grant the caller, a waiter, its next try: the key is free there and the
// caller's entry, which the refusal entered, is first. Only an entry of the
// caller's own Client at another wait start refuses so: its waiter left,
// and its withdraw has not reached the node yet. No release will be
// announced there, so the refusal counts toward the head's wake-up as such
// an announcement would (see waitQueues.freedByRefusal).
func (a *attempt) freesForCaller(r reply) bool {
	return r.err == nil && !r.granted && r.holder == "" && a.waits() &&
		r.first == strconv.FormatInt(a.args[2].(int64), 10)+" "+a.c.id
}

// waits reports whether the caller is a waiter: a refusal enters its place
// (acquire.lua: its lease, the planned sleep and the slack, is not 0). The
// slack alone is not the sign: a node timeout under a millisecond sends 0
// for it, with a sleep of at least the drift floor.
func (a *attempt) waits() bool {
	return a.args[4].(int64)+a.args[5].(int64) > 0
}

// parse reads an acquire script's reply: {1, counter} or {0, pttl,
// counter, holder, head}, counters as decimal strings (exact past 2^53).
func (a *attempt) parse(i int, v any, err error) reply {
	r := reply{node: i}
	res, _ := v.([]any)
	switch {
	case err != nil && strings.Contains(err.Error(), "fence counter") && strings.Contains(err.Error(), "exhausted"):
		r.err = a.c.nodeErr(i, fmt.Errorf("%w: %v", ErrTokenExhausted, err))
	case err != nil:
		r.err = a.c.nodeErr(i, err)
	case len(res) == 2 && asInt(res[0]) == 1:
		r.granted = true
		r.counter, err = asCounter(res[1])
	case len(res) == 5 && asInt(res[0]) == 0:
		r.holderTTL = max(msSat(asInt(res[1])), 0) // -2: free, another waiter is first
		r.holder, _ = res[3].(string)
		r.first, _ = res[4].(string)
		r.counter, err = asCounter(res[2])
	default:
		err = fmt.Errorf("unexpected acquire reply %v", v)
	}
	if err != nil && r.err == nil {
		r.err = a.c.nodeErr(i, err)
	}
	return r
}

// isYes reports whether a script answered yes: 1, or a reply that begins
// with 1 (release.lua's {1, announcement}).
func isYes(v any) bool {
	if res, ok := v.([]any); ok && len(res) > 0 {
		v = res[0]
	}
	return asInt(v) == 1
}

func asInt(v any) int64 {
	n, _ := v.(int64)
	return n
}

func asCounter(v any) (uint64, error) {
	s, _ := v.(string)
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("fence counter %q: %w", s, err)
	}
	return n, nil
}

// late handles a reply that came after node i's call had already counted
// as timed out: a grant there is real. Once the attempt has failed or its
// hold was unlocked, it is released. Until then it is the failed call it
// was counted as: a failing attempt steps back every node whose call
// failed (fail, abandon), and a hold's Unlock sends its release to every
// node that failed, or the TTL removes it. It is not stepped back while the
// attempt decides: if the attempt wins, that release carries the hold's own
// value, and one that fails and is sent again (owe) can land after an
// extension counted the node, deleting a key the extension relied on
// (docs/protocol.md, section 4: the model found it).
func (a *attempt) late(i int, v any) {
	r := a.parse(i, v, nil)
	if !r.granted {
		return
	}
	a.mu.Lock()
	state := a.state
	a.mu.Unlock()
	if state == abandoned || state == unlocked {
		a.stepBack(i)
	}
}

// settle does a node's part once the outcome is known.
func (a *attempt) settle(r reply, state attemptState, token uint64) {
	switch state {
	case acquired:
		if r.err == nil && r.counter < token {
			a.heal(r.node, token)
		}
		a.served(r)
	case abandoned:
		if r.granted || mayHideGrant(r.err) {
			a.stepBack(r.node)
		}
	case unlocked:
		// A grant answered in time: Unlock's release to this node was
		// queued behind this call (a key's calls to a node go in order),
		// so it reaches the node after it and removes the grant. A step
		// back of its own could instead come first, when this answer
		// arrives between Unlock's decision and its sends: the release
		// then finds nothing there and counts as a refusal (measured: an
		// Unlock that waited for its last node, or reported the hold lost).
		// But a node that Unlock left out (its latest answer was a
		// refusal: a split vote's re-ask was still out) gets no release:
		// its grant steps back.
		a.mu.Lock()
		skipped := a.skipped[r.node]
		a.mu.Unlock()
		if mayHideGrant(r.err) || (r.granted && skipped) { // sent in whatever order
			a.stepBack(r.node)
		}
		if r.err == nil && r.counter < token { // heal all the same
			a.heal(r.node, token)
		}
		a.served(r)
	}
}

// served withdraws the caller's place from a node that refused the
// attempt, once it got the key: the refusal entered it there (the old
// hold's release had not reached that node), where it would stand first
// for its whole lease though the caller waits no more — and the hold's
// Unlock leaves that node out. Where the attempt was granted, the place
// stays until the Unlock passes it on or ends it (see release.lua).
func (a *attempt) served(r reply) {
	if r.granted || r.err != nil || !a.waits() { // a TryLock has no place
		return
	}
	a.c.withdraw(a.key(), a.args[2].(int64), a.timeout(), r.node)
}

// decide fixes the outcome and returns the latest answers already in, which
// the caller settles; answers that come later settle themselves.
func (a *attempt) decide(state attemptState, token uint64) []reply {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.decideLocked(state, token)
}

func (a *attempt) decideLocked(state attemptState, token uint64) []reply {
	a.state, a.token = state, token
	if a.latest == nil { // compacted: every answer is in, and settled
		return nil
	}
	in := make([]reply, 0, len(a.answered))
	for i, ok := range a.answered {
		if ok {
			in = append(in, a.latest[i])
		}
	}
	a.maybeSettleLocked()
	return in
}

// refusedBy marks the hold unlocked (answers still to come heal to token;
// Unlock's release, sent to them too, removes their grants) and returns the
// nodes that refused it: Unlock leaves them out, so a grant that one of them
// answers later (a split vote's re-ask) steps back. The answers already in were settled when the hold
// was acquired. With every (an Extend may have re-created the key on any
// node), no node is left out: it returns none, and a late grant is covered
// by the Unlock's release like any other.
func (a *attempt) refusedBy(token uint64, every bool) []int {
	a.mu.Lock()
	defer a.mu.Unlock()
	// Which nodes Unlock leaves out is fixed with the state, atomically: an
	// answer that sees unlocked also sees whether its node gets a release.
	if a.latest == nil { // compacted: no answer is to come
		a.state, a.token = unlocked, token
		if every {
			return nil
		}
		return slices.Clone(a.refused)
	}
	var refused []int
	for _, r := range a.decideLocked(unlocked, token) {
		if !r.granted && r.err == nil && !every {
			refused = append(refused, r.node)
			a.skipped[r.node] = true
		}
	}
	return refused
}

func (a *attempt) maybeSettleLocked() {
	if a.pending == 0 && a.state != undecided && !isClosed(a.settled) {
		close(a.settled)
		if a.state != abandoned {
			a.compactLocked()
		}
	}
}

// compactLocked drops what only the answers to come needed, once all are
// in and settled and the attempt is held (acquired, or unlocked since): a
// held Lock keeps its attempt for as long as the hold lasts. Of the
// answers, Unlock still needs which nodes refused (refusedBy). a.mu is held.
func (a *attempt) compactLocked() {
	for i, ok := range a.answered {
		if ok && !a.latest[i].granted && a.latest[i].err == nil {
			a.refused = append(a.refused, i)
		}
	}
	a.latest, a.replies, a.skipped = nil, nil, nil
}

// heal lifts node i's counter to token, unconditionally (see heal.lua), in
// the background.
func (a *attempt) heal(i int, token uint64) {
	a.c.send(i, healScript, a.timeout(), a.fenceKey(), strconv.FormatUint(token, 10))
}

// fail abandons the attempt and returns err. It releases the grants already
// in (those nodes answered, so they are up) and waits for their answers;
// nodes that failed may hide a grant and are released in the background, so
// a frozen node does not hold the caller twice. Calls still open settle
// themselves when they answer (a late grant is released); fail waits for
// them no longer than their deadline, nor than the attempt took so far.
func (a *attempt) fail(err error) error {
	var wg sync.WaitGroup
	for _, r := range a.decide(abandoned, 0) {
		switch {
		case r.granted:
			wg.Go(func() {
				if _, err := a.release(r.node); err != nil {
					a.stepBack(r.node) // owed, and retried
				}
			})
		case mayHideGrant(r.err):
			a.stepBack(r.node)
		}
	}
	wg.Wait()
	a.mu.Lock()
	left := time.Until(a.deadline)
	a.mu.Unlock()
	// The answers still out come about as fast as the others came, unless
	// their node is down or frozen: then they may take the whole node
	// timeout, and every failed attempt of a waiter would cost that much
	// (with a node down, half the attempts under contention).
	wait := min(left, max(a.timeout()-left, time.Millisecond))
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-a.settled:
			return err
		case <-t.C:
		}
	}
	if left > wait {
		// The answers still out settle themselves (a late grant is
		// released): they count as in flight until then, or their
		// deadline, so that Close does not stop the batchers under them.
		a.c.inflight.add(1)
		go func() {
			defer a.c.inflight.done()
			t := time.NewTimer(left - wait)
			defer t.Stop()
			select {
			case <-a.settled:
			case <-t.C:
			}
		}()
	}
	return err
}

// failed is fail for tryOnce, with what the attempt saw (t).
func (a *attempt) failed(t *tally, err error) (*Lock, failure, error) {
	return nil, t.failure(), a.fail(err)
}

// abandon is fail for a caller whose ctx ended: it must return at once, so
// every node that granted or failed is released in the background, and
// calls still open release themselves when they answer.
func (a *attempt) abandon(err error) error {
	for _, r := range a.decide(abandoned, 0) {
		if r.granted || mayHideGrant(r.err) {
			a.stepBack(r.node)
		}
	}
	return err
}

// mayHideGrant reports whether an acquire call that failed with err may
// still have made a grant: any failure but one that says the call was
// never sent (its node marked down, its queue full, the Client closed),
// which leaves nothing to step back from.
func mayHideGrant(err error) bool {
	return err != nil && !errors.Is(err, errNodeDown) && !errors.Is(err, errQueueFull) && !errors.Is(err, errClosed)
}

// stepBack releases node i's grant in the background (announced, like
// every release: see release.lua).
func (a *attempt) stepBack(i int) {
	a.c.owe(i, a.releaseKeys(), a.longestTTL(), a.timeout(), a.releaseArgs(false)...)
}

// releaseArgs are release.lua's arguments: an Unlock's also pass the
// Client's entry in the waiting set, if it is still this hold's (a waiter
// served), to the Client's next waiter for the key (see waitQueues.passOn),
// or end it; a step back's keep it (the caller may still wait).
func (a *attempt) releaseArgs(unlock bool) []any {
	if !unlock {
		return []any{a.value, "", "", "", 0}
	}
	next, lease := a.c.waiters.passOn(a.key(), a.timeout())
	return []any{a.value, a.args[2], a.c.id, next, lease.Milliseconds()}
}

// longestTTL is the longest TTL the hold was given on any node.
func (a *attempt) longestTTL() time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.longest
}

// extending notes that an Extend sends ttl: a release owed from now on
// counts from that.
func (a *attempt) extending(ttl time.Duration) {
	a.mu.Lock()
	a.longest = max(a.longest, ttl)
	a.mu.Unlock()
}

// release runs compare-and-delete on node i and waits for the answer: it
// reports whether the node held this hold's value.
func (a *attempt) release(i int) (bool, error) {
	v, err := a.c.call(i, releaseScript, a.timeout(), a.releaseKeys(), a.releaseArgs(false)...)
	if err != nil {
		return false, a.c.nodeErr(i, err)
	}
	a.c.waiters.heardRelease(i, a.key(), v)
	return isYes(v), nil
}

// tryOnce is one attempt. On failure it also says what it saw (failure):
// how long the current holder's key has left, the longest a waiter should
// sleep, and how many nodes granted it before it stepped back.
//
// It decides as soon as the answers allow: a quorum of grants, or answers
// that cannot make one as they stand (a node that has not answered is
// waited for until its node timeout, unless the others decide). Then a
// split vote between contenders — the waiting sets diverged while a node
// was down, or TryLocks met on a free key — is resolved in the same attempt
// (tally.wins): the winner asks the contenders' nodes again, up to
// maxReasks times, about a round trip apart; the others fail at once.
func (c *Client) tryOnce(ctx context.Context, key string, ttl time.Duration, lc lockConfig) (*Lock, failure, error) {
	return c.try(ctx, key, ttl, lc, 0, 0)
}

// try is one attempt; a refusal keeps the caller's place in the key's
// waiting set for sleep (capped by the holder's TTL) and slack more (0 and
// 0 for none: see acquire.lua).
func (c *Client) try(ctx context.Context, key string, ttl time.Duration, lc lockConfig, sleep, slack time.Duration) (*Lock, failure, error) {
	if err := ctx.Err(); err != nil {
		return nil, failure{}, join(ErrNotAcquired, err)
	}
	// The attempt counts as in flight until its releases or heals are
	// queued: Close waits for it before it stops the batchers, or a grant
	// would be left behind. Counted before the check, so a Close that
	// found nothing in flight is seen here.
	c.inflight.add(1)
	defer c.inflight.done()
	select {
	case <-c.life.Done():
		return nil, failure{}, join(ErrNotAcquired, errClosed)
	default:
	}
	wall := time.Now() // network waits are real time
	a := c.startAttempt(key, ttl, lc.since, sleep, slack, lc.trace)
	t := newTally(len(c.nodes), c.quorum)
	var (
		reask    *time.Timer // set while a split vote's winner waits to ask again
		reasks   int
		lastAsk  = wall        // when the latest ask went out
		trip     time.Duration // how long the latest ask's answers took to come, so far
		reaskEnd time.Time     // no new ask after this
	)
	defer func() {
		if reask != nil {
			reask.Stop()
		}
	}()
	for {
		n := t.counts()
		if n.granted >= c.quorum {
			break
		}
		stuck := n.waiting == 0 || n.granted+n.waiting < c.quorum
		if stuck && reask == nil {
			if reaskEnd.IsZero() {
				reaskEnd = time.Now().Add(a.timeout())
			}
			if reasks == maxReasks || !t.wins(a.value) || time.Now().After(reaskEnd) ||
				!c.cfg.clock.Now().Before(a.start.Add(ttl-c.driftOf(ttl))) {
				return a.failed(t, join(append([]error{ErrNotAcquired}, t.errs()...)...))
			}
			// The contenders step back now; ask again once their releases
			// had about a round trip to land: as long as the answers took
			// (not the silent nodes', which may be dead).
			reask = time.NewTimer(trip)
		}
		var reaskC <-chan time.Time
		if reask != nil {
			reaskC = reask.C
		}
		select {
		case r := <-a.replies:
			t.add(r)
			if r.err == nil {
				trip = time.Since(lastAsk)
			}
		case <-reaskC:
			reask, reasks = nil, reasks+1
			refusers := t.refusers()
			lastAsk = time.Now()
			t.asked(refusers)
			a.ask(refusers)
		case <-ctx.Done():
			return nil, failure{}, a.abandon(join(append([]error{ErrNotAcquired, ctx.Err()}, t.errs()...)...))
		case <-c.life.Done():
			// Close waits for the releases this owes: give up now rather
			// than make it wait for the answers, re-asks and step backs.
			return nil, failure{}, a.abandon(join(ErrNotAcquired, errClosed))
		}
	}
	token, counted, ok := a.fence(t.grants())
	if !ok {
		return a.failed(t, join(ErrNotAcquired, errNoFenceQuorum))
	}
	until := a.start.Add(ttl - c.driftOf(ttl))
	now := c.cfg.clock.Now()
	if !now.Before(until) {
		return a.failed(t, join(ErrNotAcquired, errNoValidity))
	}
	l := newLock(a, token, until)
	l.acquired = now
	l.nodes = counted
	for _, r := range a.decide(acquired, token) {
		a.settle(r, acquired, token)
	}
	c.cfg.observer.Acquired(key, token, now.Sub(a.start))
	if lc.autoExtend {
		l.startWatchdog()
	}
	return l, failure{}, nil
}
