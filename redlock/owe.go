package redlock

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"time"
)

// A release the protocol owes a node — a failed attempt's step back, a
// late grant's, the rest of an Unlock — is
// sent until one of these happens: it lands (the node deletes the value,
// or answers that it is gone), the key's TTL has certainly passed, or
// Close gives it up. One send is not enough: a node that timed out (frozen,
// or a fresh connection whose handshake it cannot answer yet) may still run
// the call that made the grant when it resumes, and the grant would then
// stay for the whole TTL. The retries wait on the Client's scheduler (no
// goroutine each) and go through the batchers like any call; a
// compare-and-delete of a value of our own is harmless however late.
//
// When the TTL has certainly passed: the grant, if any, was made before the
// release was owed, so its key is gone by then plus the longest TTL it was
// given (and the drift a node's clock may have) — unless the node did not
// answer. A node that timed out may be frozen with the acquire read but not
// run: it runs it when it resumes, with a whole TTL from then. So every try
// that got no reply moves the end to a whole TTL after it; a try that the
// node refused (the connection: no process there, so nothing of ours runs
// later; a restart keeps the key's absolute expiry) does not. A node that
// stays frozen is therefore tried until Close: while it is marked down
// (health.go) its releases wait, costing nothing, and are sent the moment
// it is up again; else at most every 8 node timeouts, the last try before
// the end sent at the end itself. A node is owed at most queueSize. After
// a try without a reply, "value gone" settles the release only when its
// try was sent once the node had answered: a node runs what it had read
// before it froze in its first turn after it resumes, before any call sent
// after its first answer, but a try written to a pooled connection while
// it was frozen may run in that same turn, before the acquire.

// owedRelease is one node's release, sent until it is settled.
type owedRelease struct {
	c       *Client
	node    int
	keys    []string // the lock key
	args    []any    // release.lua's: value, channel, next Client
	ttl     time.Duration
	timeout time.Duration
	until   time.Time // on the Client's clock: past it, the key has certainly expired
	tries   int       // sends so far
	blind   bool      // a try got no reply, and none since was sent to a node known to run
}

// owe sends a release of value from node i and retries it until it is
// settled. ttl is the longest TTL the hold was given there.
func (c *Client) owe(i int, lockKey []string, ttl, timeout time.Duration, args ...any) {
	if r := c.owedRelease(i, lockKey, ttl, timeout, args...); r != nil {
		r.send()
	}
}

// owedRelease makes the release, counted among those owed to node i; nil,
// with the release left to the TTL, when the node is owed as many as its
// queues hold (queueSize): a node that far behind could not be sent more.
func (c *Client) owedRelease(i int, lockKey []string, ttl, timeout time.Duration, args ...any) *owedRelease {
	if c.owed[i].Add(1) > queueSize {
		c.owed[i].Add(-1)
		c.cfg.logger.LogAttrs(context.Background(), slog.LevelWarn, "redlock: release left to the TTL: too many owed to the node",
			slog.Int("node", i), slog.String("key", lockKey[0]))
		return nil
	}
	return &owedRelease{
		c:       c,
		node:    i,
		keys:    lockKey,
		args:    args,
		ttl:     ttl,
		timeout: timeout,
		until:   c.expiry(ttl),
	}
}

// expiry is when a key given ttl now has certainly expired on a node.
func (c *Client) expiry(ttl time.Duration) time.Time {
	return c.cfg.clock.Now().Add(addSat(ttl, c.driftOf(ttl)))
}

func (r *owedRelease) send() {
	r.tries++
	r.c.newGroup(r, r.timeout, []int{r.node}, releaseScript, r.keys, r.args...).start()
}

// answer settles the release or schedules its next send (r is the sink of
// its groups, one at a time).
func (r *owedRelease) answer(_ int, v any, err error) {
	switch {
	case errors.Is(err, errClosed):
		r.settle() // Close gave it up
		return
	case err == nil && (isYes(v) || !r.blind):
		r.c.waiters.heardRelease(r.node, r.keys[0], v)
		r.settle() // landed, or found nothing after all the node had read
		return
	case err == nil:
		// Found nothing, but this try may have run before an acquire
		// that the node had read on another connection before it froze:
		// one more, sent now that the node is known to run, comes after.
		r.blind = false
		if !r.c.sched.at(r.c.cfg.clock.Now(), r.send) {
			r.settle()
		}
		return
	}
	r.c.nodeErr(r.node, err)
	r.failed(err)
}

// late is a reply after the call had timed out: the release landed, and
// the retry already scheduled will find nothing.
func (*owedRelease) late(int, any) {}

func (r *owedRelease) settle() { r.c.owed[r.node].Add(-1) }

// failed schedules the next send after a backoff, or at the end (see
// above) if that comes first; past the end, or once the Client is closing,
// the release is given up.
func (r *owedRelease) failed(err error) {
	now := r.c.cfg.clock.Now()
	if noReply(err) { // the node may run the acquire later: a whole TTL from now
		r.blind = true
		if end := r.c.expiry(r.ttl); end.After(r.until) {
			r.until = end
		}
	}
	if r.blind && r.c.park(r.node, r) {
		return // sent again when the node is up: no call, and no end, until then
	}
	if !now.Before(r.until) {
		r.settle()
		r.c.cfg.logger.LogAttrs(context.Background(), slog.LevelDebug, "redlock: release given up: the key expires first",
			slog.Int("node", r.node), slog.String("key", r.keys[0]), slog.Int("tries", r.tries))
		return
	}
	next := now.Add(r.backoff())
	if next.After(r.until) {
		next = r.until // the last try at the end itself
	}
	if !r.c.sched.at(next, r.send) {
		r.settle()
		r.c.cfg.logger.LogAttrs(context.Background(), slog.LevelDebug, "redlock: release given up: client closed",
			slog.Int("node", r.node), slog.String("key", r.keys[0]), slog.Int("tries", r.tries))
	}
}

// noReply reports whether err says only that no reply came: the node may
// have read the call, and not run it yet.
func noReply(err error) bool {
	var ne net.Error
	return errors.Is(err, errNodeTimeout) || errors.Is(err, context.DeadlineExceeded) ||
		(errors.As(err, &ne) && ne.Timeout())
}

// maxOwedDoublings bounds the backoff at 2^3 = 8 node timeouts: a node
// that answers again is released within that (with the default node
// timeout, ttl/20, within 40% of the TTL), and a retry to a node that is
// down costs one call that fails.
const maxOwedDoublings = 3

// backoff doubles from the node timeout, the bound a call is given: a node
// that answers at all answers between two tries.
func (r *owedRelease) backoff() time.Duration {
	return mulSat(r.timeout, 1<<min(r.tries-1, maxOwedDoublings))
}

// owing is the sink of Unlock's release fan-out: votes counts the answers,
// and a node that failed is owed its release.
type owing struct {
	votes voteSink
	c     *Client
	keys  []string
	args  []any
	ttl   time.Duration
	tmo   time.Duration
}

func (o owing) answer(i int, v any, err error) {
	if err == nil {
		o.c.waiters.heardRelease(i, o.keys[0], v)
	}
	if err != nil && !errors.Is(err, errClosed) {
		if r := o.c.owedRelease(i, o.keys, o.ttl, o.tmo, o.args...); r != nil {
			r.tries = 1
			r.failed(err)
		}
	}
	o.votes.answer(i, v, err)
}

func (o owing) late(i int, v any) { o.votes.late(i, v) }
