package redlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Script calls to one node go through that node's batcher: a few workers,
// each with its own queue, that take whatever calls are queued at that
// moment and send them in one pipeline. A lone call goes out at once, so
// light traffic pays no latency; under load, concurrent acquisitions share
// round trips. The calls for one key always use the same queue, so they
// reach a node in the order they were queued: an acquisition right after an
// Unlock that decided at quorum reaches each node after that node's release,
// and a handle's Extends and Unlock arrive in the order the handle made them.

const (
	workersPerNode = 4
	maxBatch       = 64
	queueSize      = 4096
)

var errQueueFull = errors.New("redlock: node queue full")

type batcher struct {
	c      *Client
	node   int
	queues [workersPerNode]chan *op // one per worker
	quit   chan struct{}

	after   chan struct{} // a slot per release sent after stop (see do)
	start   sync.Once
	mu      sync.RWMutex // protects stopped against sends to queues
	stopped bool
	workers sync.WaitGroup

	ran sync.Map // *redis.Script → true once the node ran it (see execAcked)
}

func newBatcher(c *Client, node int) *batcher {
	b := &batcher{c: c, node: node, quit: make(chan struct{}), after: make(chan struct{}, workersPerNode)}
	for w := range b.queues {
		b.queues[w] = make(chan *op, queueSize/workersPerNode)
	}
	return b
}

// queue is the queue of o's key.
func (b *batcher) queue(o *op) chan *op {
	var h uint32 = 2166136261 // FNV-1a
	for i := 0; i < len(o.keys[0]); i++ {
		h = (h ^ uint32(o.keys[0][i])) * 16777619
	}
	return b.queues[h%workersPerNode]
}

// do queues o; a node marked down (see health.go), a full queue or a
// stopped batcher completes it at once (a release on a stopped batcher
// goes on a goroutine of its own, at most workersPerNode at once). A node
// marked down fails every call but a release with an error that names its
// cause: a release is owed (see mustReach), and one not sent would leave
// its grant for the whole TTL if the node is only slow, so it still goes;
// nobody waits for it but a worker (Unlock decides at a quorum).
func (b *batcher) do(o *op) {
	b.start.Do(func() {
		b.c.checkNode(b.node) // first use of the node: can it evict our keys?
		for w := range b.queues {
			b.workers.Go(func() { b.work(b.queues[w]) })
		}
	})
	if !o.mustReach() && b.c.isDown(b.node) {
		o.g.complete(o, nil, b.c.downErr(b.node))
		return
	}
	// complete may queue further calls: never run it under mu.
	b.mu.RLock()
	if b.stopped {
		b.mu.RUnlock()
		if o.mustReach() {
			// A late grant's step back, or an Unlock after Close: sent
			// on a goroutine of its own, done by its wire deadline (or
			// when go-redis lets go of a frozen node's call); at most
			// workersPerNode at once, as before Close.
			select {
			case b.after <- struct{}{}:
				go func() {
					defer func() { <-b.after }()
					b.execSafely([]*op{o})
				}()
				return
			default:
			}
		}
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
func (b *batcher) work(queue chan *op) {
	batch := make([]*op, 0, maxBatch)
	for {
		select {
		case o := <-queue:
			batch = append(batch[:0], o)
		case <-b.quit:
			// Close waited for every call in flight: what is left timed
			// out in the queue. Releases still go (see mustReach), the
			// rest never will.
			batch = batch[:0]
		drain:
			for {
				select {
				case o := <-queue:
					if o.mustReach() {
						batch = append(batch, o)
					} else {
						o.g.complete(o, nil, errClosed)
					}
				default:
					break drain
				}
			}
			for len(batch) > 0 {
				n := min(len(batch), maxBatch)
				b.execSafely(batch[:n])
				batch = batch[n:]
			}
			return
		}
	fill:
		for len(batch) < maxBatch {
			select {
			case o := <-queue:
				batch = append(batch, o)
			default:
				break fill
			}
		}
		b.execSafely(batch)
		clear(batch)
	}
}

// execSafely runs exec; a panic inside go-redis (or a hook of the caller's)
// fails the batch's open calls and is logged, and the worker goes on.
func (b *batcher) execSafely(batch []*op) {
	defer func() {
		if p := recover(); p != nil {
			err := fmt.Errorf("redlock: recovered panic: %v", p)
			b.c.cfg.logger.LogAttrs(context.Background(), slog.LevelError, "redlock: recovered a panic in a node call",
				slog.Int("node", b.node), slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
			for _, o := range batch {
				o.g.complete(o, nil, err)
			}
		}
	}()
	b.exec(batch)
}

// exec sends a batch. Each call keeps its own deadline: its group completes
// it as a timeout when that passes, and a reply after that goes to the
// group's late handler. The pipeline itself runs under the latest deadline
// in the batch, so that a short-deadline call cannot cut short a call that
// still has time (a ctx deadline is all go-redis honours); with a release
// in it, under at least that release's node timeout from now (mustReach).
//
// Every outcome from go-redis is noted for the node's health (see
// health.go; but a deadline error that the call's group noted already: see
// note), before the call completes: a late reply lifts a mark before
// its step back is queued. Calls queued before their node was marked down
// fail at once, not sent, as new ones do, releases but (see do).
func (b *batcher) exec(batch []*op) {
	live := batch[:0]
	down := b.c.isDown(b.node)
	for _, o := range batch {
		if o.completed.Load() && !o.mustReach() {
			continue // timed out in the queue, never sent: nothing to undo
		}
		if down && !o.completed.Load() && !o.mustReach() {
			o.g.complete(o, nil, b.c.downErr(b.node))
			continue
		}
		o.sentOpen = !o.completed.Load()
		live = append(live, o)
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := wireContext(live, time.Now())
	defer cancel()
	rdb := b.c.nodes[b.node].rdb
	if b.needsAcks(live) {
		b.execAcked(ctx, rdb, live)
		return
	}
	if len(live) == 1 {
		o := live[0]
		v, err := o.script.Run(ctx, rdb, o.keys, o.args...).Result()
		b.note(o, err)
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
		v, err := pipelineReply(cmds, i)
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			v, err = o.script.Run(ctx, rdb, o.keys, o.args...).Result() // loads it for the next time
		}
		b.note(o, err)
		o.g.complete(o, v, err)
	}
}

// note notes o's outcome from go-redis for its node's health (health.go).
// A call still open when sent that its deadline completed since was noted
// then, as a timeout (group.expire). A deadline error that go-redis reports
// when that call ends (from a frozen node, once it runs again) is the same
// failure seen late: noted again, it could mark the node down only then,
// once other nodes' marks were lifted, and fail the calls queued behind it
// on a node that answers.
func (b *batcher) note(o *op, err error) {
	if o.sentOpen && vague(err) && o.completed.Load() {
		return
	}
	b.c.observe(b.node, err, o.g.timeout)
}

// wireContext is the context that live's pipeline runs under (see exec):
// the latest deadline of a call in it, or, with a release in it, at least
// that release's node timeout from now: a release that waited in the queue
// (or waits for a connection of go-redis's pool, which honours the ctx)
// must still go out.
func wireContext(live []*op, now time.Time) (context.Context, context.CancelFunc) {
	var ctx context.Context
	var latest time.Time
	var release time.Duration // the longest node timeout of a release in live
	for _, o := range live {
		if d, _ := o.g.ctx.Deadline(); ctx == nil || d.After(latest) {
			ctx, latest = o.g.ctx, d
		}
		if o.mustReach() {
			release = max(release, o.g.timeout)
		}
	}
	if wire := now.Add(release); release > 0 && wire.After(latest) {
		return context.WithDeadline(context.Background(), wire)
	}
	return ctx, func() {}
}

// stop refuses new calls, but for releases (sent on goroutines of their
// own, see do), and fails the queued ones, but for releases (the workers
// send them as they exit). It waits for the workers until deadline at
// most: a worker can be inside a call to a frozen node that go-redis holds
// until its own ReadTimeout (or for ever, with ReadTimeout -1, until the
// caller closes that redis client). Every call has completed by its
// deadline already; such a worker exits when go-redis lets go of it.
func (b *batcher) stop(deadline <-chan struct{}) {
	b.mu.Lock()
	b.stopped = true
	b.mu.Unlock()
	close(b.quit)
	waitUntil(&b.workers, deadline)
}

// waitUntil waits for wg, or until deadline is closed.
func waitUntil(wg *sync.WaitGroup, deadline <-chan struct{}) {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-deadline:
	}
}

// pipelineReply is the reply to the i-th script of a pipeline whose
// replies are cmds.
func pipelineReply(cmds []redis.Cmder, i int) (any, error) {
	if i >= len(cmds) {
		return nil, errors.New("redlock: pipeline lost a reply")
	}
	return cmds[i].(*redis.Cmd).Result()
}
