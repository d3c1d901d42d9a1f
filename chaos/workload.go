package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/history"
	"github.com/fencedlock/fencedlock/clock"
	"github.com/fencedlock/fencedlock/fencing"
	"github.com/fencedlock/fencedlock/redlock"
)

// The workload: every client loops Lock → fenced write → hold → Unlock on
// one key, recording each step. The store is an append-only log behind a
// fencing guard, on a Redis server of its own that no fault touches.
const (
	lockKey  = "chaos:lock"
	resource = "chaos:store"
)

type client struct {
	id    int
	cfg   Config
	clk   clock.Clock // the client's own clock: skewed for client-clock-skew
	rdbs  []*redis.Client
	rl    *redlock.Client
	rec   *history.Recorder
	store *fencing.Redis
	rnd   *rand.Rand // hold times; used by this client's goroutine only

	pauseNext atomic.Bool // client-pause: stop past the validity on the next hold
	skewNext  atomic.Bool // client-clock-skew: work to the validity on the next hold
	writes    int

	// pause stops the client past the validity of l, in its critical section,
	// and records the fault: sleepPastValidity, unless the client runs in a
	// process of its own (procchild.go).
	pause func(ctx context.Context, l *redlock.Lock)
}

func newClient(id int, cfg Config, addrs []string, clk clock.Clock, rec *history.Recorder, store *fencing.Redis) (*client, error) {
	c := &client{id: id, cfg: cfg, clk: clk, rec: rec, store: store,
		rnd: rand.New(rand.NewPCG(cfg.Seed, uint64(id)))}
	c.pause = c.sleepPastValidity
	nodes := make([]redis.UniversalClient, len(addrs))
	for i, a := range addrs {
		rdb := redis.NewClient(&redis.Options{
			Addr:        a,
			DialTimeout: cfg.NodeTimeout,
			MaxRetries:  -1, // the lock decides what a failed node means
			// Let the per-call deadlines free the connections of a frozen node.
			ContextTimeoutEnabled: true,
			PoolSize:              8,
		})
		c.rdbs = append(c.rdbs, rdb)
		nodes[i] = rdb
	}
	rl, err := redlock.New(nodes, redlock.WithClock(clk), redlock.WithNodeTimeout(cfg.NodeTimeout))
	if err != nil {
		c.close()
		return nil, err
	}
	c.rl = rl
	return c, nil
}

func (c *client) close() {
	if c.rl != nil {
		_ = c.rl.Close()
	}
	for _, r := range c.rdbs {
		_ = r.Close()
	}
}

// loop runs holds until ctx ends. Each operation that started is completed
// in the history, even when ctx ends in the middle of a hold.
func (c *client) loop(ctx context.Context) {
	for ctx.Err() == nil {
		c.once(ctx)
	}
}

func (c *client) once(ctx context.Context) {
	a := c.rec.Acquire(c.id, lockKey)
	lctx, cancel := context.WithTimeout(ctx, 2*c.cfg.TTL)
	l, err := c.rl.Lock(lctx, lockKey, c.cfg.TTL)
	cancel()
	if err != nil {
		a.Fail(err)
		return
	}
	h := a.OK(l.Token(), l.Value(), l.Until().Sub(c.clk.Now()))
	// Finish the hold even when the run ends meanwhile.
	octx := context.WithoutCancel(ctx)

	switch {
	case c.pauseNext.CompareAndSwap(true, false):
		c.pause(ctx, l)
	case c.skewNext.CompareAndSwap(true, false):
		// Work right up to the validity, as this client's (slow) clock tells it.
		start := time.Now()
		_ = c.clk.Sleep(ctx, l.Until().Sub(c.clk.Now())-c.cfg.TTL/20)
		c.rec.FaultAt(fault.ClientClockSkew, c.id, start, time.Now(), nil)
	}

	c.writes++
	entry := fmt.Sprintf("c%d-%d", c.id, c.writes)
	w := c.rec.Write(h, resource, entry)
	wctx, wcancel := context.WithTimeout(octx, time.Second)
	err = c.store.Append(wctx, resource, l.Token(), entry)
	wcancel()
	switch {
	case err == nil:
		w.Accepted(0) // the final log gives the store's order
	case errors.Is(err, fencing.ErrStaleToken):
		w.Rejected()
	default:
		w.Fail(err)
	}

	sleepReal(ctx, time.Millisecond+time.Duration(c.rnd.Int64N(int64(4*time.Millisecond))))

	r := c.rec.Release(h)
	uctx, ucancel := context.WithTimeout(octx, c.cfg.TTL)
	err = l.Unlock(uctx)
	ucancel()
	switch {
	case err == nil:
		r.OK()
	case errors.Is(err, redlock.ErrLockLost):
		r.LockLost()
	default:
		r.Fail(err)
	}
}

// sleepPastValidity is a GC pause: the client stops well past the validity
// of l, then writes as if nothing happened.
func (c *client) sleepPastValidity(ctx context.Context, l *redlock.Lock) {
	start := time.Now()
	sleepReal(ctx, l.Until().Sub(c.clk.Now())+c.cfg.TTL/2)
	c.rec.FaultAt(fault.ClientPause, c.id, start, time.Now(), nil)
}

// sleepReal waits d of real time: the workload's own pacing, not a
// synchronisation.
func sleepReal(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
