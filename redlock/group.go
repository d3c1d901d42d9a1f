package redlock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Script calls to one node go through that node's batcher: a few workers
// that each take whatever calls are queued at that moment and send them in
// one pipeline. A lone call goes out at once, so light traffic pays no
// latency; under load, concurrent acquisitions share round trips.
//
// The calls of one attempt, fan-out or single call form a group with one
// deadline: its context carries the deadline to go-redis, and when it
// passes, every call of the group still open completes as a timeout —
// go-redis honours a ctx deadline only with ContextTimeoutEnabled, so the
// library enforces it itself. Every call completes exactly once: answered,
// timed out, or refused when the queue is full or the client closed; so no
// caller waits forever.

const (
	workersPerNode = 4
	maxBatch       = 64
	queueSize      = 4096
)

var (
	errQueueFull   = errors.New("redlock: node queue full")
	errNodeTimeout = errors.New("redlock: node timeout")
)

// sink receives a group's answers. done runs exactly once per call, on a
// worker or on the deadline: it must not block. late gets a reply that came
// after its call had completed as a timeout: a call to a frozen node can
// outlive its deadline, and its effect (a grant) must still be seen.
type sink interface {
	done(node int, v any, err error)
	late(node int, v any)
}

// group is the node calls that share a deadline and a sink.
type group struct {
	c       *Client
	ctx     context.Context
	cancel  context.CancelFunc
	stop    func() bool // stops the expiry callback
	sink    sink
	ops     []op
	pending atomic.Int32
}

// op is one script call of a group.
type op struct {
	g        *group
	node     int
	script   *redis.Script
	keys     []string
	args     []any
	finished atomic.Bool
}

// newGroup prepares one call of script per node in nodes; start sends them.
func (c *Client) newGroup(s sink, timeout time.Duration, nodes []int, script *redis.Script, keys []string, args ...any) *group {
	g := &group{c: c, sink: s, ops: make([]op, len(nodes))}
	for k, i := range nodes {
		g.ops[k] = op{g: g, node: i, script: script, keys: keys, args: args}
	}
	g.ctx, g.cancel = context.WithTimeout(context.Background(), timeout)
	return g
}

// start queues the group's calls.
func (g *group) start() {
	g.pending.Store(int32(len(g.ops)))
	g.c.inflight.add(len(g.ops))
	g.stop = context.AfterFunc(g.ctx, g.expire)
	for k := range g.ops {
		g.c.batchers[g.ops[k].node].do(&g.ops[k])
	}
}

// expire completes every open call as a timeout, at the deadline.
func (g *group) expire() {
	for k := range g.ops {
		g.finish(&g.ops[k], nil, errNodeTimeout, true)
	}
	g.cancel()
}

// complete completes o with its reply.
func (g *group) complete(o *op, v any, err error) { g.finish(o, v, err, false) }

// finish completes o once; a second completion hands a reply to late. The
// context is not cancelled early: a call to a frozen node may still be
// reading under it, and its late reply must come through.
func (g *group) finish(o *op, v any, err error, expiring bool) {
	if !o.finished.CompareAndSwap(false, true) {
		if err == nil {
			g.sink.late(o.node, v)
		}
		return
	}
	g.sink.done(o.node, v, err)
	g.c.inflight.done()
	if g.pending.Add(-1) == 0 && !expiring {
		// All answered in time: the expiry will not be needed. (expire
		// itself never reads stop, which start may still be setting.) The
		// context is left to its deadline: a batch of other groups' calls
		// may be on the wire under it.
		g.stop()
	}
}

type batcher struct {
	c    *Client
	node int
	ops  [workersPerNode]chan *op // one queue per worker; a key always uses the same one
	quit chan struct{}

	start sync.Once
	mu    sync.RWMutex // protects close against sends to ops
	close bool
	wg    sync.WaitGroup // workers
}

func newBatcher(c *Client, node int) *batcher {
	b := &batcher{c: c, node: node, quit: make(chan struct{})}
	for w := range b.ops {
		b.ops[w] = make(chan *op, queueSize/workersPerNode)
	}
	return b
}

// queue is the queue of o's key: the calls for one key go to a node in
// order, so an acquisition right after an Unlock that decided at quorum
// reaches each node after that node's release, not before it.
func (b *batcher) queue(o *op) chan *op {
	var h uint32 = 2166136261 // FNV-1a
	for i := 0; i < len(o.keys[0]); i++ {
		h = (h ^ uint32(o.keys[0][i])) * 16777619
	}
	return b.ops[h%workersPerNode]
}

// do queues o.
func (b *batcher) do(o *op) {
	b.start.Do(func() {
		b.wg.Add(workersPerNode)
		for w := range b.ops {
			go b.work(b.ops[w])
		}
	})
	// complete may queue further calls: never run it under mu.
	b.mu.RLock()
	if b.close {
		b.mu.RUnlock()
		o.g.complete(o, nil, errClosed)
		return
	}
	select {
	case b.queue(o) <- o:
		b.mu.RUnlock()
		return
	default:
	}
	b.mu.RUnlock()
	o.g.complete(o, nil, errQueueFull)
}

// work sends the batches of one queue until stop.
func (b *batcher) work(ops chan *op) {
	defer b.wg.Done()
	batch := make([]*op, 0, maxBatch)
	for {
		select {
		case o := <-ops:
			batch = append(batch[:0], o)
		case <-b.quit:
			for {
				select {
				case o := <-ops:
					o.g.complete(o, nil, errClosed)
				default:
					return
				}
			}
		}
	fill:
		for len(batch) < maxBatch {
			select {
			case o := <-ops:
				batch = append(batch, o)
			default:
				break fill
			}
		}
		b.exec(batch)
		clear(batch)
	}
}

func (b *batcher) exec(batch []*op) {
	live := batch[:0]
	var ctx context.Context
	var deadline time.Time
	for _, o := range batch {
		if o.finished.Load() {
			continue // timed out in the queue, never sent: nothing to undo
		}
		// The batch goes out under the earliest deadline among its calls.
		if d, _ := o.g.ctx.Deadline(); ctx == nil || d.Before(deadline) {
			ctx, deadline = o.g.ctx, d
		}
		live = append(live, o)
	}
	if len(live) == 0 {
		return
	}
	rdb := b.c.nodes[b.node].rdb
	if len(live) == 1 {
		o := live[0]
		v, err := o.script.Run(ctx, rdb, o.keys, o.args...).Result()
		o.g.complete(o, v, err)
		return
	}
	cmds, _ := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, o := range live {
			p.EvalSha(ctx, o.script.Hash(), o.keys, o.args...)
		}
		return nil
	})
	for i, o := range live {
		var v any
		var err error
		if i < len(cmds) {
			v, err = cmds[i].(*redis.Cmd).Result()
		} else {
			err = errors.New("redlock: pipeline lost a reply")
		}
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			v, err = o.script.Run(ctx, rdb, o.keys, o.args...).Result() // loads it for the next time
		}
		o.g.complete(o, v, err)
	}
}

// stop refuses new calls, fails the queued ones and ends the workers.
func (b *batcher) stop() {
	b.mu.Lock()
	b.close = true
	b.mu.Unlock()
	close(b.quit)
	b.wg.Wait()
}

// resultSink delivers one call's answer on a channel.
type resultSink chan result

type result struct {
	v   any
	err error
}

func (s resultSink) done(_ int, v any, err error) { s <- result{v, err} }
func (resultSink) late(int, any)                  {}

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

func (s logSink) done(i int, _ any, err error) {
	if err != nil && !errors.Is(err, errClosed) {
		s.c.nodeErr(i, err)
	}
}
func (logSink) late(int, any) {}

// send runs one script on node i in the background.
func (c *Client) send(i int, s *redis.Script, timeout time.Duration, keys []string, args ...any) {
	c.newGroup(logSink{c}, timeout, []int{i}, s, keys, args...).start()
}

// tracker counts calls in flight; wait returns once none is.
type tracker struct {
	mu   sync.Mutex // protects n, zero
	n    int
	zero chan struct{} // closed when n drops to 0; nil when nobody waits
}

func (t *tracker) add(n int) {
	t.mu.Lock()
	t.n += n
	t.mu.Unlock()
}

func (t *tracker) done() {
	t.mu.Lock()
	t.n--
	if t.n < 0 {
		panic("redlock: inflight below zero")
	}
	if t.n == 0 && t.zero != nil {
		close(t.zero)
		t.zero = nil
	}
	t.mu.Unlock()
}

func (t *tracker) wait() {
	t.mu.Lock()
	if t.n == 0 {
		t.mu.Unlock()
		return
	}
	if t.zero == nil {
		t.zero = make(chan struct{})
	}
	z := t.zero
	t.mu.Unlock()
	<-z
}
