package redlock

import (
	"fmt"
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
	abandoned              // failed or unlocked; late nodes release their grant
)

type reply struct {
	node    int
	granted bool
	counter uint64
	pttl    time.Duration
	err     error
}

type attempt struct {
	c       *Client
	key     string
	value   string
	ttl     time.Duration
	start   time.Time
	timeout time.Duration
	keys    []string // lock key, fence counter key
	channel string   // where releases are announced
	replies chan reply

	mu       sync.Mutex // protects the fields below
	state    attemptState
	token    uint64
	answered []bool        // node i's acquire call has returned
	got      []reply       // node i's answer, valid when answered[i]
	work     int           // acquire calls not yet answered
	finished chan struct{} // closed when work is 0 after a decision
	closed   bool          // finished is closed
}

func (c *Client) startAttempt(key string, ttl time.Duration) *attempt {
	n := len(c.nodes)
	a := &attempt{
		c:        c,
		key:      key,
		value:    uuid.NewString(),
		ttl:      ttl,
		start:    c.cfg.clock.Now(),
		timeout:  c.nodeTimeout(ttl),
		keys:     []string{key, FenceKey(key)},
		replies:  make(chan reply, n),
		answered: make([]bool, n),
		got:      make([]reply, n),
		work:     n,
		finished: make(chan struct{}),
	}
	a.channel = releaseChannel(key)
	c.newGroup(a, a.timeout, c.all, acquireScript, a.keys, a.value, ttl.Milliseconds()).start()
	return a
}

// done records node i's reply to the acquire script (the attempt is the
// sink of its group). It runs on a worker or the deadline: it must not block.
func (a *attempt) done(i int, v any, err error) {
	r := reply{node: i}
	res, _ := v.([]any)
	switch {
	case err != nil:
		r.err = a.c.nodeErr(i, err)
	case len(res) == 2 && asInt(res[0]) == 1:
		r.granted, r.counter = true, uint64(asInt(res[1]))
	case len(res) == 3 && asInt(res[0]) == 0:
		r.pttl, r.counter = time.Duration(asInt(res[1]))*time.Millisecond, uint64(asInt(res[2]))
	default:
		r.err = a.c.nodeErr(i, fmt.Errorf("unexpected acquire reply %v", v))
	}
	a.mu.Lock()
	a.answered[i], a.got[i] = true, r
	state, token := a.state, a.token
	a.work--
	a.maybeFinishLocked()
	a.mu.Unlock()
	a.replies <- r // buffered for every node: never blocks
	a.settle(r, state, token)
}

// late handles a reply that came after node i's call had already counted
// as timed out: a grant there is real, so it is released unless the hold is
// still on; a hold that is on keeps it, and Unlock's release (sent to every
// node that failed) or the TTL removes it.
func (a *attempt) late(i int, v any) {
	res, _ := v.([]any)
	if len(res) != 2 || asInt(res[0]) != 1 {
		return
	}
	a.mu.Lock()
	state := a.state
	a.mu.Unlock()
	if state != acquired {
		a.c.send(i, releaseScript, a.timeout, a.keys[:1], a.value, a.channel)
	}
}

func asInt(v any) int64 {
	n, _ := v.(int64)
	return n
}

// settle does a node's part once the outcome is known.
func (a *attempt) settle(r reply, state attemptState, token uint64) {
	switch state {
	case acquired:
		if r.err == nil && r.counter < token {
			a.heal(r.node, token)
		}
	case abandoned:
		if r.granted || r.err != nil { // an error may hide a grant
			a.c.send(r.node, releaseScript, a.timeout, a.keys[:1], a.value, a.channel)
		}
		if token > 0 && r.err == nil && r.counter < token { // unlocked: heal all the same
			a.heal(r.node, token)
		}
	}
}

// decide fixes the outcome and returns the answers already in, which the
// caller settles; answers that come later settle themselves.
func (a *attempt) decide(state attemptState, token uint64) []reply {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.state, a.token = state, token
	in := make([]reply, 0, len(a.answered))
	for i, ok := range a.answered {
		if ok {
			in = append(in, a.got[i])
		}
	}
	a.maybeFinishLocked()
	return in
}

func (a *attempt) maybeFinishLocked() {
	if a.work == 0 && a.state != undecided && !a.closed {
		a.closed = true
		close(a.finished)
	}
}

// heal lifts node i's counter to token, unconditionally (see heal.lua), in
// the background.
func (a *attempt) heal(i int, token uint64) {
	a.c.send(i, healScript, a.timeout, a.keys[1:], token)
}

// release runs compare-and-delete on node i and waits for the answer: it
// reports whether the node held this hold's value.
func (a *attempt) release(i int) (bool, error) {
	v, err := a.c.call(i, releaseScript, a.timeout, a.keys[:1], a.value, a.channel)
	if err != nil {
		return false, a.c.nodeErr(i, err)
	}
	return asInt(v) == 1, nil
}
