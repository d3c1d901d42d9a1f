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
// latency; under load, concurrent acquisitions share round trips. Every
// queued call completes — answered, failed by its deadline, or refused
// when the queue is full or the client closed — so no caller waits forever.

const (
	workersPerNode = 4
	maxBatch       = 64
	queueSize      = 4096
)

var (
	errQueueFull   = errors.New("redlock: node queue full")
	errExpired     = errors.New("redlock: node call deadline passed while queued")
	errNodeTimeout = errors.New("redlock: node timeout")
)

// op is one script call. done runs exactly once, on a worker or on the
// op's deadline timer: it must not block. A reply that comes after the
// deadline went to done as a timeout is handed to late, if set: go-redis
// honours a ctx deadline only with ContextTimeoutEnabled, so a call to a
// frozen node can outlive its deadline, and its effect must still be seen.
type op struct {
	script   *redis.Script
	keys     []string
	args     []any
	deadline time.Time
	done     func(v any, err error)
	late     func(v any, err error)

	finished atomic.Bool
	timer    *time.Timer
}

type batcher struct {
	c    *Client
	node int
	ops  chan *op
	quit chan struct{}

	start sync.Once
	mu    sync.RWMutex // protects close against sends to ops
	close bool
	wg    sync.WaitGroup // workers
}

func newBatcher(c *Client, node int) *batcher {
	return &batcher{c: c, node: node, ops: make(chan *op, queueSize), quit: make(chan struct{})}
}

// do queues o; o.done is called exactly once.
func (b *batcher) do(o *op) {
	b.start.Do(func() {
		b.wg.Add(workersPerNode)
		for range workersPerNode {
			go b.work()
		}
	})
	// done may queue further calls: never run it under mu.
	b.mu.RLock()
	if b.close {
		b.mu.RUnlock()
		o.done(nil, errClosed)
		return
	}
	b.c.inflight.add()
	o.timer = time.AfterFunc(time.Until(o.deadline), func() { b.complete(o, nil, errNodeTimeout) })
	select {
	case b.ops <- o:
		b.mu.RUnlock()
		return
	default:
	}
	b.mu.RUnlock()
	b.finish(o, nil, errQueueFull)
}

func (b *batcher) finish(o *op, v any, err error) {
	if b.complete(o, v, err) {
		o.timer.Stop()
	}
}

// complete completes o once and reports whether this call did; a second
// completion is a late reply.
func (b *batcher) complete(o *op, v any, err error) bool {
	if !o.finished.CompareAndSwap(false, true) {
		if o.late != nil && err == nil {
			o.late(v, err)
		}
		return false
	}
	o.done(v, err)
	b.c.inflight.done()
	return true
}

// work sends batches until stop.
func (b *batcher) work() {
	defer b.wg.Done()
	batch := make([]*op, 0, maxBatch)
	for {
		select {
		case o := <-b.ops:
			batch = append(batch[:0], o)
		case <-b.quit:
			for {
				select {
				case o := <-b.ops:
					b.finish(o, nil, errClosed)
				default:
					return
				}
			}
		}
	fill:
		for len(batch) < maxBatch {
			select {
			case o := <-b.ops:
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
	now := time.Now()
	live := batch[:0]
	var deadline time.Time
	for _, o := range batch {
		if o.finished.Load() {
			continue // timed out in the queue, never sent: nothing to undo
		}
		if !o.deadline.After(now) {
			b.finish(o, nil, errExpired)
			continue
		}
		if deadline.IsZero() || o.deadline.Before(deadline) {
			deadline = o.deadline
		}
		live = append(live, o)
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	rdb := b.c.nodes[b.node].rdb
	if len(live) == 1 {
		o := live[0]
		v, err := o.script.Run(ctx, rdb, o.keys, o.args...).Result()
		b.finish(o, v, err)
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
		b.finish(o, v, err)
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

// call runs one script on node i and waits for the answer (bounded by
// timeout: every op completes by its deadline).
func (c *Client) call(i int, s *redis.Script, timeout time.Duration, keys []string, args ...any) (any, error) {
	type result struct {
		v   any
		err error
	}
	ch := make(chan result, 1)
	c.batchers[i].do(&op{script: s, keys: keys, args: args, deadline: time.Now().Add(timeout),
		done: func(v any, err error) { ch <- result{v, err} }})
	r := <-ch
	return r.v, r.err
}

// send runs one script on node i in the background; errors are reported
// as node errors.
func (c *Client) send(i int, s *redis.Script, timeout time.Duration, keys []string, args ...any) {
	c.batchers[i].do(&op{script: s, keys: keys, args: args, deadline: time.Now().Add(timeout),
		done: func(_ any, err error) {
			if err != nil && !errors.Is(err, errClosed) {
				c.nodeErr(i, err)
			}
		}})
}

// tracker counts calls in flight; wait returns once none is.
type tracker struct {
	mu   sync.Mutex // protects n, zero
	n    int
	zero chan struct{} // closed when n drops to 0; nil when nobody waits
}

func (t *tracker) add() {
	t.mu.Lock()
	t.n++
	t.mu.Unlock()
}

func (t *tracker) done() {
	t.mu.Lock()
	t.n--
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
