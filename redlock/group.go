package redlock

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// The calls of one attempt, fan-out or single call form a group with one
// deadline: its context carries the deadline to go-redis, and when it
// passes, every call of the group still open completes as a timeout —
// go-redis honours a ctx deadline only with ContextTimeoutEnabled, so the
// library enforces it itself. Every call completes exactly once: answered,
// timed out, or refused when the queue is full or the client closed; so no
// caller waits for ever.

var errNodeTimeout = errors.New("redlock: node timeout")

// sink receives a group's answers. answer runs exactly once per call, on a
// worker or on the deadline: it must not block. late gets a reply that came
// after its call had completed as a timeout: a call to a frozen node can
// outlive its deadline, and its effect (a grant) must still be seen.
type sink interface {
	answer(node int, v any, err error)
	late(node int, v any)
}

// group is the node calls that share a deadline and a sink.
type group struct {
	c       *Client
	ctx     context.Context
	timeout time.Duration // what ctx's deadline was set from
	cancel  context.CancelFunc
	stop    func() bool // stops the expiry callback
	sink    sink
	ops     []op
	pending atomic.Int32 // calls not yet completed

	trace  OpTrace   // the operation the calls are part of, if traced (observe.go)
	queued time.Time // when start queued the calls; set only for a RoundTripObserver or a trace
}

// op is one script call of a group.
type op struct {
	g         *group
	node      int
	script    *redis.Script
	keys      []string
	args      []any
	completed atomic.Bool
	sentOpen  bool // the worker sent it before it completed (batcher.note); the worker's own
}

// mustReach reports whether o must reach its node even after its deadline
// passed in a queue: a release. Skipped, it would leave its grant for the
// whole TTL (a busy machine can keep a call queued past its node timeout);
// sent late, compare-and-delete of a value of our own is as harmless as a
// slow node's. Its caller already had the timeout.
func (o *op) mustReach() bool { return o.script == releaseScript }

// newGroup prepares one call of script per node in nodes; start sends them.
func (c *Client) newGroup(s sink, timeout time.Duration, nodes []int, script *redis.Script, keys []string, args ...any) *group {
	g := &group{c: c, sink: s, timeout: timeout, ops: make([]op, len(nodes))}
	for k, i := range nodes {
		g.ops[k] = op{g: g, node: i, script: script, keys: keys, args: args}
	}
	g.ctx, g.cancel = context.WithTimeout(context.Background(), timeout)
	return g
}

// start queues the group's calls.
func (g *group) start() {
	if g.c.cfg.hooks.trip || g.trace != nil {
		g.queued = time.Now() // network waits are real time
	}
	g.arm()
	for k := range g.ops {
		g.c.batchers[g.ops[k].node].do(&g.ops[k])
	}
}

// arm counts the group's calls in flight and sets their deadline.
func (g *group) arm() {
	g.pending.Store(int32(len(g.ops)))
	g.c.inflight.add(len(g.ops))
	g.stop = context.AfterFunc(g.ctx, g.expire)
}

// expire completes every open call as a timeout, at the deadline.
// A call that got no reply by then is a transport failure of its node
// (see health.go); its error names the node's last real cause, if one was
// seen.
func (g *group) expire() {
	for k := range g.ops {
		o := &g.ops[k]
		if o.completed.Load() {
			continue
		}
		if g.finish(o, nil, g.c.timeoutErr(o.node), true) {
			g.c.failed(o.node, errNodeTimeout, g.timeout)
		}
	}
	g.cancel()
}

// complete completes o with its reply.
func (g *group) complete(o *op, v any, err error) { g.finish(o, v, err, false) }

// finish completes o once, and reports whether this did; a second
// completion hands a reply to late. The context is not cancelled early: a
// call to a frozen node may still be reading under it, and its late reply
// must come through.
func (g *group) finish(o *op, v any, err error, expiring bool) bool {
	if !o.completed.CompareAndSwap(false, true) {
		if err == nil {
			g.sink.late(o.node, v)
		}
		return false
	}
	g.answered(o, err)
	g.sink.answer(o.node, v, err)
	g.c.inflight.done()
	if g.pending.Add(-1) == 0 && !expiring {
		// All answered in time: the expiry will not be needed. (expire
		// itself never reads stop, which start may still be setting.) The
		// context is left to its deadline: a batch of other groups' calls
		// may be on the wire under it.
		g.stop()
	}
	return true
}

// resultSink delivers one call's answer on a channel.
type resultSink chan result

type result struct {
	v   any
	err error
}

func (s resultSink) answer(_ int, v any, err error) { s <- result{v, err} }
func (resultSink) late(int, any)                    {}

// call runs one script on node i and waits for the answer (bounded by
// timeout: every call completes by its deadline).
func (c *Client) call(i int, s *redis.Script, timeout time.Duration, keys []string, args ...any) (any, error) {
	ch := make(resultSink, 1)
	c.newGroup(ch, timeout, []int{i}, s, keys, args...).start()
	r := <-ch
	return r.v, r.err
}

// logSink reports failures of background calls as node errors.
type logSink struct{ c *Client }

func (s logSink) answer(i int, _ any, err error) {
	if err != nil && !errors.Is(err, errClosed) {
		s.c.nodeErr(i, err)
	}
}
func (logSink) late(int, any) {}

// send runs one script on node i in the background.
func (c *Client) send(i int, s *redis.Script, timeout time.Duration, keys []string, args ...any) {
	c.newGroup(logSink{c}, timeout, []int{i}, s, keys, args...).start()
}
