package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/locker"
	"github.com/fencedlock/fencedlock/chaos/recorder"
	"github.com/fencedlock/fencedlock/clock"
	"github.com/fencedlock/fencedlock/fencing"
)

// The workload: every client loops Lock → fenced write → hold → Unlock,
// recording each step. The store is an append-only log per key behind a
// fencing guard, on a Redis server of its own that no fault touches. The
// plain workload holds one key briefly; the hunt's (holds.go) varies keys
// and holds.
const (
	lockKey  = "chaos:lock"
	resource = "chaos:store"
)

// target is a lock key and the store resource its holders write.
type target struct{ key, resource string }

// huntTargets are the hunt's keys: the plain one, and two that share a hash
// slot and so a fence counter (see redlock.FenceKey): each draws tokens
// that the other's acquisitions move on.
var huntTargets = []target{
	{lockKey, resource},
	{"chaos:{slot}:a", "chaos:store:a"},
	{"chaos:{slot}:b", "chaos:store:b"},
}

// targets returns the keys of cfg's workload.
func targets(cfg Config) []target {
	if cfg.hunt() {
		return huntTargets
	}
	return []target{{lockKey, resource}}
}

type client struct {
	id    int
	cfg   Config
	spec  lockSpec
	clk   clock.Clock // the client's own clock: skewed for client-clock-skew
	rdbs  []*redis.Client
	lk    locker.Locker
	rec   *recorder.Client
	store *store
	rnd   *rand.Rand // hold times and shapes; shared by the client's lanes (see lockedSource)
	// seq gives the harness's token to the holds of a lock that has none,
	// in the order the acquisitions returned; shared by the clients.
	seq *atomic.Uint64

	// longHeld is closed by client 0 of the rolling profile once it took
	// its long hold (or gave up): the others contend from then on.
	longHeld chan struct{}

	pauseNext atomic.Bool // client-pause: stop past the validity on the next hold
	skewNext  atomic.Bool // client-clock-skew: work to the validity on the next hold
	lateNext  atomic.Bool // late-write: write again once the hold is over
	writes    atomic.Int64

	probe   *prober        // nil: the nodes are not probed (probe.go)
	probing sync.WaitGroup // probes made in the background

	valuesMu sync.Mutex      // protects lockID, held, recorded: the client's lanes share them
	lockID   string          // the end of every hold value of lk, once a hold showed it (see ownBefore)
	held     map[string]bool // every hold value Lock returned to a lane of this client
	// recorded counts, per hold value, the re-creates of the hold
	// (locker.Reacquirer) that its recorded extensions carry (see newRecreates).
	recorded map[string]int

	// pause stops the client past the validity of l, in its critical section,
	// and records the fault: sleepPastValidity, unless the client runs in a
	// process of its own (procchild.go).
	pause func(ctx context.Context, l locker.Hold)
}

func newClient(id int, cfg Config, addrs []string, clk clock.Clock, rec *recorder.Client, st *store, seq *atomic.Uint64) (*client, error) {
	if cfg.Lock == "" {
		cfg.Lock = LockFencedlock // a Config that did not go through withDefaults
	}
	spec, err := lockSpecOf(cfg.Lock)
	if err != nil {
		return nil, err
	}
	c := &client{id: id, cfg: cfg, spec: spec, clk: clk, rec: rec, store: st, seq: seq,
		rnd: rand.New(&lockedSource{src: rand.NewPCG(cfg.Seed, uint64(id))})}
	c.pause = c.sleepPastValidity
	for _, a := range addrs {
		rdb := redis.NewClient(&redis.Options{
			Addr:        a,
			DialTimeout: cfg.NodeTimeout,
			MaxRetries:  -1, // the lock decides what a failed node means
			// Let the per-call deadlines free the connections of a frozen node.
			ContextTimeoutEnabled: true,
			PoolSize:              8,
		})
		c.rdbs = append(c.rdbs, rdb)
	}
	lk, err := spec.build(locker.Config{Nodes: c.rdbs, Clock: clk, NodeTimeout: cfg.NodeTimeout})
	if err != nil {
		c.close()
		return nil, err
	}
	c.lk = lk
	return c, nil
}

// warmUp dials a connection to each of rdbs (a PING), each within
// timeout; a node that does not answer is left to the run.
func warmUp(rdbs []*redis.Client, timeout time.Duration) {
	var wg sync.WaitGroup
	for _, rdb := range rdbs {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			_ = rdb.Ping(ctx).Err()
		})
	}
	wg.Wait()
}

func (c *client) close() {
	if c.lk != nil {
		_ = c.lk.Close()
	}
	for _, r := range c.rdbs {
		_ = r.Close()
	}
}

// loop runs holds until ctx ends. Each operation that started is completed
// in the history, even when ctx ends in the middle of a hold.
func (c *client) loop(ctx context.Context) {
	defer c.probing.Wait()
	if c.cfg.Lanes > 1 {
		c.lanes(ctx)
		return
	}
	c.lane(ctx)
}

// lane is one goroutine's loop of holds.
func (c *client) lane(ctx context.Context) {
	if c.cfg.rolling() {
		c.rolling(ctx) // rolling.go
		return
	}
	for ctx.Err() == nil {
		if c.cfg.hunt() {
			c.huntOnce(ctx)
		} else {
			c.once(ctx)
		}
	}
}

func (c *client) once(ctx context.Context) {
	tg := target{lockKey, resource}
	l, h, ok := c.acquire(ctx, tg.key, false)
	if !ok {
		return
	}
	// Finish the hold even when the run ends meanwhile.
	octx := context.WithoutCancel(ctx)

	switch {
	case c.pauseNext.CompareAndSwap(true, false):
		c.pause(ctx, l)
	case c.skewNext.CompareAndSwap(true, false):
		// Work right up to the validity, as this client's (slow) clock tells it.
		start := time.Now()
		_ = c.clk.Sleep(ctx, l.Until().Sub(c.clk.Now())-c.cfg.TTL/20)
		c.rec.FaultAt(fault.ClientClockSkew, start, time.Now(), nil)
	}

	c.write(octx, h, tg.resource)
	sleepReal(ctx, time.Millisecond+time.Duration(c.rnd.Int64N(int64(4*time.Millisecond))))
	ended := time.Now()
	c.unlock(octx, l, h)
	if c.lateNext.CompareAndSwap(true, false) {
		c.lateWrite(octx, h, tg.resource, ended)
	}
}

// acquire calls Lock (with auto-extension if auto, which only a
// locker.AutoExtender is asked for) for key, bounded by twice the TTL, and
// records it with the nodes that granted it, when the hold knows them
// (indexes of the backend's nodes, the same the faults name), so that the
// checker blames a node fault only on the holds that node was part of. A
// hold with no fencing token is recorded with the harness's (see seq).
func (c *client) acquire(ctx context.Context, key string, auto bool) (locker.Hold, recorder.Hold, bool) {
	return c.acquireBy(ctx, key, func(ctx context.Context) (locker.Hold, error) {
		lctx, cancel := context.WithTimeout(ctx, 2*c.cfg.TTL)
		defer cancel()
		if ax, ok := c.lk.(locker.AutoExtender); ok && auto {
			return ax.LockAutoExtend(lctx, key, c.cfg.TTL)
		}
		return c.lk.Lock(lctx, key, c.cfg.TTL)
	})
}

// acquireBy is acquire, with the call to the lock made by lock.
func (c *client) acquireBy(ctx context.Context, key string, lock func(context.Context) (locker.Hold, error)) (locker.Hold, recorder.Hold, bool) {
	a := c.rec.Acquire(key)
	l, err := lock(ctx)
	if err != nil {
		a.Fail(err)
		c.probeAfterFailure(ctx, key, c.clk.Now())
		return nil, recorder.Hold{}, false
	}
	token, ok := l.Token()
	if !ok {
		token = c.seq.Add(1)
	}
	a.Value(l.Value())
	if g, ok := l.(locker.Granted); ok {
		a.Granted(g.Nodes())
	}
	h := a.OK(token, c.realTime(l.Until()))
	c.valuesMu.Lock()
	c.lockID = l.Value()[max(len(l.Value())-8, 0):]
	if c.held == nil {
		c.held = map[string]bool{}
	}
	c.held[l.Value()] = true
	c.valuesMu.Unlock()
	c.probeHold(h)
	return l, h, true
}

// realTime returns t, a time on the client's clock (slow for
// client-clock-skew), on the real clock, which the recorder reads.
func (c *client) realTime(t time.Time) time.Time { return time.Now().Add(t.Sub(c.clk.Now())) }

// write appends a fresh entry to resource with h's token (unfenced when
// the lock has none, see store), and records it.
func (c *client) write(ctx context.Context, h recorder.Hold, res string) {
	entry := fmt.Sprintf("c%d-%d", c.id, c.writes.Add(1))
	w := h.Write(res, entry)
	wctx, wcancel := context.WithTimeout(ctx, time.Second)
	err := c.store.Append(wctx, res, h.Token(), entry)
	wcancel()
	switch {
	case err == nil:
		w.Accepted() // the final log gives the store's order
	case errors.Is(err, fencing.ErrStaleToken):
		w.Rejected()
	default:
		w.Fail(err)
	}
}

// unlock releases l and records it.
func (c *client) unlock(ctx context.Context, l locker.Hold, h recorder.Hold) {
	defer c.forgetRecreates(l)
	r := h.Release()
	at := c.clk.Now()
	uctx, ucancel := context.WithTimeout(ctx, c.cfg.TTL)
	err := l.Release(uctx)
	ucancel()
	switch {
	case err == nil:
		r.OK()
	case errors.Is(err, locker.ErrLost):
		r.LockLost()
	default:
		r.Fail(err)
	}
	c.probeAfterRelease(ctx, h, at)
}

// sleepPastValidity is a GC pause: the client stops well past the validity
// of l, then writes as if nothing happened.
func (c *client) sleepPastValidity(ctx context.Context, l locker.Hold) {
	start := time.Now()
	sleepReal(ctx, l.Until().Sub(c.clk.Now())+c.cfg.TTL/2)
	c.rec.FaultAt(fault.ClientPause, start, time.Now(), nil)
}

// lateWrite is a former holder's write, as from one that was paused or cut
// off between its check and its write: once the store has taken a greater
// token for res than h's (at once if the next holder's is h's plus one, so
// that the write is stale by exactly one), it writes with h's token. The
// fencing guard must refuse it. It is recorded as a late-write fault from
// ended, when the hold was over, since the client acts outside its hold.
func (c *client) lateWrite(ctx context.Context, h recorder.Hold, res string, ended time.Time) {
	if !c.awaitHigher(ctx, h, res) {
		// No later holder wrote (amnesia can hand out tokens below h's):
		// the late write is owed, by the next hold.
		c.lateNext.Store(true)
		return
	}
	c.write(ctx, h, res)
	c.rec.FaultAt(fault.LateWrite, ended, time.Now(), nil)
}

// awaitHigher waits, two TTLs at most, until the store has taken a greater
// token for res than h's, polling every hundredth of a TTL; it reports
// whether it has.
func (c *client) awaitHigher(ctx context.Context, h recorder.Hold, res string) bool {
	deadline := time.Now().Add(2 * c.cfg.TTL)
	for time.Now().Before(deadline) {
		hctx, cancel := context.WithTimeout(ctx, c.cfg.TTL)
		top, err := c.store.Highest(hctx, res)
		cancel()
		if err == nil && top > h.Token() {
			return true
		}
		sleepReal(ctx, c.cfg.TTL/100)
	}
	return false
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
