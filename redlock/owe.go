package redlock

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// A release the protocol owes a node — a failed attempt's step back, a
// late grant's, a failed transfer's old hold, the rest of an Unlock — is
// sent until one of these happens: it lands (the node deletes the value,
// or answers that it is gone), the key's TTL has certainly passed, or
// Close gives it up. One send is not enough: a node that timed out (frozen,
// or a fresh connection whose handshake it cannot answer yet) may still run
// the call that made the grant when it resumes, and the grant would then
// stay for the whole TTL. The retries wait on the Client's scheduler (no
// goroutine each) and go through the batchers like any call; a
// compare-and-delete of a value of our own is harmless however late.

// owedRelease is one node's release, sent until it is settled.
type owedRelease struct {
	c       *Client
	node    int
	keys    []string // the lock key
	args    []any    // release.lua's: value, channel, next Client
	timeout time.Duration
	until   time.Time // on the Client's clock: past it, the key has certainly expired
	tries   int       // sends so far
}

// owe sends a release of value from node i and retries it until it is
// settled. ttl is the longest TTL the hold was given there: counted from
// now (the grant, if any, was made before the release is owed), plus the
// drift a node's clock may have, the key is then certainly gone.
func (c *Client) owe(i int, lockKey []string, ttl, timeout time.Duration, args ...any) {
	r := c.owedRelease(i, lockKey, ttl, timeout, args...)
	r.send()
}

func (c *Client) owedRelease(i int, lockKey []string, ttl, timeout time.Duration, args ...any) *owedRelease {
	return &owedRelease{
		c:       c,
		node:    i,
		keys:    lockKey,
		args:    args,
		timeout: timeout,
		until:   c.cfg.clock.Now().Add(addSat(ttl, c.driftOf(ttl))),
	}
}

func (r *owedRelease) send() {
	r.tries++
	r.c.newGroup(r, r.timeout, []int{r.node}, releaseScript, r.keys, r.args...).start()
}

// answer settles the release or schedules its next send (r is the sink of
// its groups, one at a time).
func (r *owedRelease) answer(_ int, _ any, err error) {
	if err == nil || errors.Is(err, errClosed) {
		return // landed or found nothing; or Close gave it up
	}
	r.c.nodeErr(r.node, err)
	r.retry()
}

// late is a reply after the call had timed out: the release landed, and
// the retry already scheduled will find nothing.
func (*owedRelease) late(int, any) {}

// retry schedules the next send after a backoff, unless the key has
// certainly expired by then or the Client is closing.
func (r *owedRelease) retry() {
	next := r.c.cfg.clock.Now().Add(r.backoff())
	if !next.Before(r.until) {
		r.c.cfg.logger.LogAttrs(context.Background(), slog.LevelDebug, "redlock: release given up: the key expires first",
			slog.Int("node", r.node), slog.String("key", r.keys[0]), slog.Int("tries", r.tries))
		return
	}
	if !r.c.sched.at(next, r.send) {
		r.c.cfg.logger.LogAttrs(context.Background(), slog.LevelDebug, "redlock: release given up: client closed",
			slog.Int("node", r.node), slog.String("key", r.keys[0]), slog.Int("tries", r.tries))
	}
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
	if err != nil && !errors.Is(err, errClosed) {
		r := o.c.owedRelease(i, o.keys, o.ttl, o.tmo, o.args...)
		r.tries = 1
		r.retry()
	}
	o.votes.answer(i, v, err)
}

func (o owing) late(i int, v any) { o.votes.late(i, v) }
