package redlock

import (
	"context"
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
	c         *Client
	key, fkey string
	value     string
	ttl       time.Duration
	start     time.Time
	timeout   time.Duration
	parent    context.Context // values only: node calls are not cancelled with the caller
	replies   chan reply      // every node's first answer, buffered

	mu       sync.Mutex // protects the fields below
	state    attemptState
	token    uint64
	answered []bool        // node i's acquire call has returned
	got      []reply       // node i's answer, valid when answered[i]
	work     int           // node calls still running, with their settling
	finished chan struct{} // closed when work is 0 after a decision
	closed   bool          // finished is closed
}

func (c *Client) startAttempt(ctx context.Context, key string, ttl time.Duration) *attempt {
	n := len(c.nodes)
	a := &attempt{
		c:        c,
		key:      key,
		fkey:     fenceKey(key),
		value:    uuid.NewString(),
		ttl:      ttl,
		start:    c.cfg.clock.Now(),
		timeout:  c.nodeTimeout(ttl),
		parent:   context.WithoutCancel(ctx),
		replies:  make(chan reply, n),
		answered: make([]bool, n),
		got:      make([]reply, n),
		work:     n,
		finished: make(chan struct{}),
	}
	c.bg.Add(n)
	for i := range c.nodes {
		go a.acquireOn(i)
	}
	return a
}

func (a *attempt) acquireOn(i int) {
	defer a.c.bg.Done()
	r := reply{node: i}
	ctx, cancel := context.WithTimeout(a.parent, a.timeout)
	res, err := acquireScript.Run(ctx, a.c.nodes[i].rdb, []string{a.key, a.fkey}, a.value, a.ttl.Milliseconds()).Int64Slice()
	cancel()
	switch {
	case err != nil:
		r.err = a.c.nodeErr(i, err)
	case len(res) == 2 && res[0] == 1:
		r.granted, r.counter = true, uint64(res[1])
	case len(res) == 3 && res[0] == 0:
		r.pttl, r.counter = time.Duration(res[1])*time.Millisecond, uint64(res[2])
	default:
		r.err = a.c.nodeErr(i, fmt.Errorf("unexpected acquire reply %v", res))
	}
	a.mu.Lock()
	a.answered[i], a.got[i] = true, r
	state, token := a.state, a.token
	a.mu.Unlock()
	a.replies <- r
	a.settle(r, state, token)
	a.doneWork()
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
			_, _ = a.release(r.node)
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

func (a *attempt) doneWork() {
	a.mu.Lock()
	a.work--
	a.maybeFinishLocked()
	a.mu.Unlock()
}

func (a *attempt) maybeFinishLocked() {
	if a.work == 0 && a.state != undecided && !a.closed {
		a.closed = true
		close(a.finished)
	}
}

func (a *attempt) nodeCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(a.parent, a.timeout)
}

// release runs compare-and-delete on node i; it reports whether the node held
// this hold's value.
func (a *attempt) release(i int) (bool, error) {
	ctx, cancel := a.nodeCtx()
	defer cancel()
	n, err := releaseScript.Run(ctx, a.c.nodes[i].rdb, []string{a.key}, a.value, releaseChannel(a.key)).Int64()
	if err != nil {
		return false, a.c.nodeErr(i, err)
	}
	return n == 1, nil
}

// heal lifts node i's counter to token, unconditionally (see heal.lua).
func (a *attempt) heal(i int, token uint64) {
	ctx, cancel := a.nodeCtx()
	defer cancel()
	if err := healScript.Run(ctx, a.c.nodes[i].rdb, []string{a.fkey}, token).Err(); err != nil {
		a.c.nodeErr(i, err)
	}
}

// raise lifts node i's counter to token if this hold still owns the key there.
func (a *attempt) raise(i int, token uint64) bool {
	ctx, cancel := a.nodeCtx()
	defer cancel()
	n, err := raiseScript.Run(ctx, a.c.nodes[i].rdb, []string{a.key, a.fkey}, a.value, token).Int64()
	if err != nil {
		a.c.nodeErr(i, err)
		return false
	}
	return n == 1
}
