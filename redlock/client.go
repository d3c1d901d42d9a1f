package redlock

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"log/slog"
	"math"
	"reflect"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Client acquires locks on a fixed set of independent Redis nodes. It is safe
// for concurrent use. Close stops its background work; the redis clients
// passed to New stay the caller's to close.
type Client struct {
	cfg    config
	nodes  []node
	all    []int // 0..N-1
	quorum int

	batchers []*batcher     // per node: every script call goes through one
	inflight inflightCalls  // script calls queued or on the wire, attempts deciding
	bg       sync.WaitGroup // the scheduler and its extensions, pub/sub listeners
	once     sync.Once

	bgMu     sync.Mutex // protects bgClosed
	bgClosed bool       // Close waits for bg: no more Adds to it

	waiters *waitQueues
	sched   scheduler // ends and extends the watched holds (Done, AutoExtend); retries owed releases
	id      string    // 4 random bytes in hex: the end of every hold value (holdValue), the member of the Client's entry in a waiting set

	health []health           // per node: marked down or not, and why (health.go)
	downs  atomic.Int32       // nodes marked down: at most N − quorum
	owed   []atomic.Int32     // per node: releases owed and not yet settled (owe.go)
	life   context.Context    // ends at Close: attempts give up, waiters return, node probes end
	end    context.CancelFunc // ends life
}

type node struct {
	index   int
	addr    string
	rdb     redis.UniversalClient
	checked *sync.Once // the eviction check was started (eviction.go)
}

// New returns a Client over nodes: independent Redis servers (each may be a
// standalone server, a Sentinel failover client, a Redis Cluster or a Ring),
// of which a majority must grant a lock. nodes must be non-empty, without nil
// entries and without the same server twice. New does no I/O: it rejects
// the same client twice and two nodes that name a common address (a client's
// Addr, a Cluster's seeds, a Ring's shards), but it cannot tell two names
// for one server apart, nor two failover clients for one Sentinel master
// name (go-redis does not expose it), which count as distinct nodes.
// Option values out of their documented range (a drift factor outside
// [0, 1), a negative node timeout) are [ErrInvalidArgument] too.
func New(nodes []redis.UniversalClient, opts ...Option) (*Client, error) {
	if len(nodes) == 0 {
		return nil, invalid("no nodes")
	}
	if err := checkOptions(opts); err != nil {
		return nil, err
	}
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.check(); err != nil {
		return nil, err
	}
	cfg.hooks = hooksOf(cfg.observer)
	if m, ok := cfg.observer.(multiObserver); ok {
		cfg.observer = m.withLogger(cfg.logger) // each part's panic logged apart
	}
	cfg.observer = safeObserver{o: cfg.observer, logger: cfg.logger}
	c := &Client{
		cfg:    cfg,
		nodes:  make([]node, len(nodes)),
		quorum: len(nodes)/2 + 1,
		health: make([]health, len(nodes)),
		owed:   make([]atomic.Int32, len(nodes)),
	}
	c.life, c.end = context.WithCancel(context.Background())
	seen := make(map[any]int, len(nodes)) // identity → node (see nodeIdentity)
	for i, n := range nodes {
		if n == nil || (reflect.ValueOf(n).Kind() == reflect.Pointer && reflect.ValueOf(n).IsNil()) {
			return nil, invalid("node %d is nil", i)
		}
		addr, ids := nodeIdentity(n)
		for _, id := range ids {
			if j, dup := seen[id]; dup {
				if s, ok := id.(string); ok {
					return nil, invalid("nodes %d and %d share the server %s (it would count twice toward quorum)",
						j, i, strings.TrimPrefix(s, "addr:"))
				}
				return nil, invalid("nodes %d and %d are the same client %s (it would count twice toward quorum)", j, i, addr)
			}
		}
		for _, id := range ids {
			seen[id] = i
		}
		if _, single := n.(*redis.Client); cfg.replicaAcks > 0 && !single {
			return nil, invalid("node %d (%s) is not a single server (%T): replica acknowledgements need one", i, addr, n)
		}
		c.nodes[i] = node{index: i, addr: addr, rdb: n, checked: new(sync.Once)}
		_, c.health[i].single = n.(*redis.Client)
		if rc, ok := n.(*redis.Client); ok && !rc.Options().ContextTimeoutEnabled {
			cfg.logger.Warn("redlock: node client without ContextTimeoutEnabled: a frozen node holds its connections until ReadTimeout",
				"node", i, "addr", addr)
		}
	}
	c.all = allNodes(len(nodes))
	c.batchers = make([]*batcher, len(nodes))
	for i := range nodes {
		c.batchers[i] = newBatcher(c, i)
	}
	var id [4]byte
	_, _ = crand.Read(id[:]) // never fails (it crashes the program instead)
	c.id = hex.EncodeToString(id[:])
	c.waiters = newWaitQueues(c)
	c.sched = scheduler{c: c, kick: make(chan struct{}, 1)}
	return c, nil
}

// Quorum is the number of nodes that must grant a lock: N/2+1.
func (c *Client) Quorum() int { return c.quorum }

// Nodes is the number of nodes.
func (c *Client) Nodes() int { return len(c.nodes) }

// Close stops the client's background work: the scheduler of watchdogs,
// expiries and owed releases' retries, pub/sub listeners, the probes of
// nodes marked down, and, after the attempts in flight released what they must, the releases
// still on the wire (each bounded by its node timeout). Locks
// held stay held until their TTL runs out; their Done channels close, and
// an Extend of one returns [ErrLockLost]. It does not close the redis
// clients passed to New. Close is idempotent.
//
// Close returns within about two and a half node timeouts even when a node
// is frozen: a call to such a node is given up at its deadline, and the
// goroutine that go-redis keeps inside it (until its own ReadTimeout, or
// until the caller closes that redis client) exits on its own. It waits
// for the releases that the attempts in flight owe, so that no grant is
// left behind that no caller was handed, also when a loaded machine makes
// them take longer than that (up to ten times as long). A release queued
// behind a call that a frozen node holds goes once go-redis lets go of
// that call, after Close returned; it is lost if the redis client is
// closed before. A release asked for after Close (an Unlock, a late
// grant's step back) is still sent, on a goroutine of its own (at most a
// few per node at once; past that it fails). An attempt in flight when
// Close begins gives up at once, with [ErrNotAcquired].
//
// A release the protocol owes and that failed is otherwise sent again
// until it lands, the node says the value is gone, or the key's TTL has
// certainly passed (a node that gives no reply is waited for: it may run
// the grant when it resumes): Close gives up those still waiting for their
// next try or for their node (and their grants stay until the TTL). A
// node's probe ends at Close; one inside a PING to a frozen node returns
// when go-redis lets go of it, as the workers do.
func (c *Client) Close() error {
	c.once.Do(func() {
		c.end()
		bound := make(chan struct{})
		deadline := time.Now().Add(c.closeTimeout())
		t := time.AfterFunc(c.closeTimeout(), func() { close(bound) })
		defer t.Stop()
		c.waiters.close()
		for _, l := range c.sched.close() {
			l.end(true)
		}
		c.bgMu.Lock()
		c.bgClosed = true
		c.bgMu.Unlock()
		waitUntil(&c.bg, bound)
		// Attempts deciding, hand-offs, releases and heals on the wire: they
		// end on their own (every call completes by its deadline, however a
		// node behaves; an attempt gives up when Close begins), about two
		// node timeouts at worst on an idle machine, later on a loaded one,
		// whose timers run late. Stopping the batchers under a release
		// would leave its grant for the whole TTL, so Close waits for them
		// past bound; drainCap only guards against a count that never ends.
		drained := make(chan struct{})
		dt := time.AfterFunc(c.drainTimeout(), func() { close(drained) })
		defer dt.Stop()
		c.inflight.wait(drained)
		// The workers send the releases still queued (see work), then
		// exit: wait for them until bound, and at least a quarter of it
		// more when the wait above ran past it (a loaded machine). A
		// worker inside a call that a frozen node holds is not waited for
		// longer: what is queued behind it goes when go-redis lets go.
		sent := make(chan struct{})
		st := time.AfterFunc(max(time.Until(deadline), c.closeTimeout()/4), func() { close(sent) })
		defer st.Stop()
		for _, b := range c.batchers {
			b.stop(sent)
		}
	})
	return nil
}

// closeTimeout bounds Close's wait for the background goroutines and the
// batchers' workers: the longest node timeout a call can have, and a little
// more for the calls queued behind it.
func (c *Client) closeTimeout() time.Duration {
	if c.cfg.nodeTimeout > 0 {
		return 2 * min(c.cfg.nodeTimeout, math.MaxInt64/2) // no overflow into no wait
	}
	return 2 * maxNodeTimeout
}

// drainCap bounds, in closeTimeouts, Close's wait for the calls in flight
// (see Close): far longer than they take, even on a loaded machine.
const drainCap = 10

// drainTimeout is drainCap closeTimeouts, saturated: a node timeout of
// years must not overflow into no wait at all.
func (c *Client) drainTimeout() time.Duration {
	ct := c.closeTimeout()
	if ct > math.MaxInt64/drainCap {
		return math.MaxInt64
	}
	return drainCap * ct
}

// goBackground runs f tracked by Close. A panic in f does not escape (see
// safely). Once Close
// waits, f runs untracked (a WaitGroup must not grow from zero while it is
// waited for): every f ends at once when the client is closing.
func (c *Client) goBackground(f func()) {
	c.bgMu.Lock()
	tracked := !c.bgClosed
	if tracked {
		c.bg.Add(1)
	}
	c.bgMu.Unlock()
	go func() {
		if tracked {
			defer c.bg.Done()
		}
		c.safely(f)
	}()
}

// safely runs f; a panic in f does not escape: it is logged with its
// stack, and f's work stops. The scheduler runs each hold's part through
// it, so that one panic (an Observer's) does not stop the others'.
func (c *Client) safely(f func()) {
	defer func() {
		if p := recover(); p != nil {
			c.cfg.logger.LogAttrs(context.Background(), slog.LevelError, "redlock: recovered a panic in a background goroutine",
				slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
		}
	}()
	f()
}

// nodeErr records a node failure and returns it as a *NodeError.
func (c *Client) nodeErr(i int, err error) *NodeError {
	ne := &NodeError{Node: i, Addr: c.nodes[i].addr, Err: err}
	c.cfg.observer.NodeError(ne)
	c.cfg.logger.LogAttrs(context.Background(), slog.LevelDebug, "redlock: node error",
		slog.Int("node", i), slog.String("addr", c.nodes[i].addr), slog.Any("err", err))
	return ne
}
