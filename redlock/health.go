package redlock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// A node known to be down costs nothing. go-redis dials a refused address
// several times, a backoff apart (DialerRetries, DialerRetryTimeout: 5 and
// 100ms by default), so a call to a killed node answers only at its node
// timeout, and every split vote or step back that waits for it pays that.
// So a transport failure (a refused dial, an i/o timeout, our node timeout
// with no reply) marks the node down: its calls then fail at once, with a
// NodeError that says why, and a single probe brings it back (probe). A
// reply of any kind, an error reply included (NOSCRIPT, READONLY, LOADING,
// a Lua error), says the node is up.
//
// Marking a node down must not cost the quorum that a healthy but loaded
// cluster still has: at most N − quorum nodes are marked down at once (the
// failures the algorithm tolerates). A node that fails beyond that is
// still called, at the cost of its node timeout, as before. Only a node
// that is one server (a *redis.Client: standalone, or a failover client
// that follows its master) is marked down: a Cluster or a Ring spans
// servers, and one shard's failure says nothing of another key's.

var errNodeDown = errors.New("redlock: node down, call not sent")

// health is what the client knows of one node's reachability.
type health struct {
	single bool // the node is one server: only such a node is marked down

	mu      sync.Mutex    // protects the fields below, and the changes of down
	cause   error         // the last transport failure since the node last answered
	probing bool          // a probe runs for the node
	since   time.Time     // when it was marked down (real time, for the log)
	every   time.Duration // the probe's interval: the node timeout of the call that marked it down

	parked  []*owedRelease // releases owed to the node while it is down: sent when it is up
	down    atomic.Bool    // calls fail at once (read without mu on every call)
	failing atomic.Bool    // cause != nil (read without mu on every reply)
}

// observe notes the outcome of a call to node i that went to go-redis,
// sent under timeout.
func (c *Client) observe(i int, err error, timeout time.Duration) {
	switch {
	case isReply(err):
		c.answered(i)
	case isTransportFailure(err):
		c.failed(i, err, timeout)
	}
}

// isReply reports whether err, from go-redis, is no error or the node's
// own error reply: either way the node answered.
func isReply(err error) bool {
	var re redis.Error
	return err == nil || errors.As(err, &re)
}

// isTransportFailure reports whether err says that the node, or the way to
// it, failed: not a reply, and not a failure of our own side (a closed
// redis client, a full queue, a recovered panic).
func isTransportFailure(err error) bool {
	if err == nil || isReply(err) {
		return false
	}
	var ne net.Error
	return errors.Is(err, errNodeTimeout) || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// vague reports whether err only says that no reply came in time: it does
// not replace a real cause already seen (a refused dial that go-redis
// reports after our deadline passed).
func vague(err error) bool {
	return errors.Is(err, errNodeTimeout) || errors.Is(err, context.DeadlineExceeded)
}

// answered notes that node i answered: its cause is forgotten, and a mark
// is lifted.
func (c *Client) answered(i int) {
	h := &c.health[i]
	if !h.failing.Load() && !h.down.Load() {
		return // the common case: nothing to clear, no lock taken
	}
	h.mu.Lock()
	h.cause = nil
	h.failing.Store(false)
	up := h.down.Load()
	var parked []*owedRelease
	if up {
		h.down.Store(false)
		c.downs.Add(-1)
		parked, h.parked = h.parked, nil
	}
	since := h.since
	h.mu.Unlock()
	c.resend(parked)
	if up {
		c.cfg.logger.LogAttrs(context.Background(), slog.LevelInfo, "redlock: node up",
			slog.Int("node", i), slog.String("addr", c.nodes[i].addr), slog.Duration("down_for", time.Since(since)))
	}
}

// failed notes a transport failure of node i on a call under timeout: it
// becomes the node's cause (unless it is vague and a real one is known),
// and the node is marked down if it may be (see above), which starts its
// probe.
func (c *Client) failed(i int, err error, timeout time.Duration) {
	h := &c.health[i]
	h.mu.Lock()
	if h.cause == nil || !vague(err) {
		h.cause = err
	}
	h.failing.Store(true)
	mark := h.single && !h.down.Load() && c.life.Err() == nil && c.reserveDown()
	start := false
	if mark {
		h.down.Store(true)
		h.since, h.every = time.Now(), timeout
		start, h.probing = !h.probing, true
	}
	cause := h.cause
	h.mu.Unlock()
	if !mark {
		return
	}
	if start {
		go c.probe(i)
	}
	c.cfg.logger.LogAttrs(context.Background(), slog.LevelWarn, "redlock: node down: its calls fail at once until a probe reaches it",
		slog.Int("node", i), slog.String("addr", c.nodes[i].addr), slog.Any("err", cause))
}

// reserveDown counts one more node down, if that leaves a quorum of nodes
// not marked.
func (c *Client) reserveDown() bool {
	for {
		n := c.downs.Load()
		if int(n) >= len(c.nodes)-c.quorum {
			return false
		}
		if c.downs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// isDown reports whether node i's calls fail at once.
func (c *Client) isDown(i int) bool { return c.health[i].down.Load() }

// downErr is the failure of a call to node i that was not sent, since the
// node is marked down: it wraps the node's last cause.
func (c *Client) downErr(i int) error {
	h := &c.health[i]
	h.mu.Lock()
	cause := h.cause
	h.mu.Unlock()
	if cause == nil { // the mark was lifted meanwhile
		return errNodeDown
	}
	return fmt.Errorf("%w; last error: %w", errNodeDown, cause)
}

// timeoutErr is the failure of a call to node i that got no reply by its
// deadline: our node timeout, and the last real cause seen for the node
// since it last answered, if one was (go-redis may still be dialling a
// refused address when our deadline passes).
func (c *Client) timeoutErr(i int) error {
	h := &c.health[i]
	if !h.failing.Load() {
		return errNodeTimeout
	}
	h.mu.Lock()
	cause := h.cause
	h.mu.Unlock()
	if cause == nil || vague(cause) {
		return errNodeTimeout
	}
	return fmt.Errorf("%w; last error: %w", errNodeTimeout, cause)
}

// probe PINGs node i while it is marked down, one PING at a time, each
// under the node timeout of the call that marked it down, and each at
// least that long after the one before: a down node gets at most the calls
// a single caller would make of it, and a node that answers again is seen
// within a round trip (a PING on the wire gets its reply as soon as the
// node sends it; go-redis retries a refused dial inside one PING every
// DialerRetryTimeout). The interval is real time: it paces network calls,
// whose deadlines are real time. The probe ends when the node answers
// (which lifts the mark), or when Close cancels it: a PING's dial backoff
// and go-redis's pool honour the cancellation at once, a read from a frozen
// node's connection only with ContextTimeoutEnabled (else at ReadTimeout,
// as for the batchers' workers).
func (c *Client) probe(i int) {
	h := &c.health[i]
	defer func() {
		if p := recover(); p != nil { // from go-redis, or a hook of the caller's
			c.cfg.logger.LogAttrs(context.Background(), slog.LevelError, "redlock: recovered a panic in a node probe",
				slog.Int("node", i), slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
			h.mu.Lock()
			h.probing = false
			var parked []*owedRelease
			if h.down.Load() { // no probe would lift it
				h.down.Store(false)
				c.downs.Add(-1)
				parked, h.parked = h.parked, nil
			}
			h.mu.Unlock()
			c.resend(parked) // the releases that waited for the mark go now
		}
	}()
	for {
		h.mu.Lock()
		if !h.down.Load() || c.life.Err() != nil {
			h.probing = false
			h.mu.Unlock()
			return
		}
		every := h.every
		h.mu.Unlock()
		start := time.Now()
		ctx, cancel := context.WithTimeout(c.life, every)
		err := c.nodes[i].rdb.Ping(ctx).Err()
		cancel()
		c.observe(i, err, every)
		if isReply(err) {
			continue // the mark is lifted: the loop ends
		}
		if wait := time.Until(start.Add(every)); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-c.life.Done():
			}
			t.Stop()
		}
	}
}

// resend sends the releases that waited for a node's mark to lift, from
// the scheduler: the caller may be a worker of that node.
func (c *Client) resend(parked []*owedRelease) {
	for _, r := range parked {
		if !c.sched.at(c.cfg.clock.Now(), r.send) {
			r.settle()
		}
	}
}

// park keeps r, a release owed to node i that failed, until the node is up
// again, and reports whether it did: not when the node is not marked down.
func (c *Client) park(i int, r *owedRelease) bool {
	h := &c.health[i]
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.down.Load() {
		return false
	}
	h.parked = append(h.parked, r)
	return true
}
