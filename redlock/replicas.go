package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Replica acknowledgements. A node that is a primary with replicas (under
// Sentinel, say) answers a write before its replicas have it: a failover
// right after a grant promotes a replica that never saw the key or the
// counter's increment, and the grant, or the token, is gone. With
// WithReplicaAcks(n), every call that writes what the guarantees rest on
// (an acquire's key and counter, an extend's expiry, a raise's counter) is
// followed on the same connection by WAIT n: the call counts only if at
// least n replicas acknowledged it, and otherwise fails as a node error
// (the write may still be on the primary, and is released like any grant
// whose answer was lost). docs/protocol.md ("Replica acknowledgements")
// says what this buys and what it does not: WAIT is not consensus.

// ErrReplicaAcks is in the chain of a node's error when fewer of its
// replicas acknowledged a write than [WithReplicaAcks] asks for.
var ErrReplicaAcks = errors.New("redlock: too few replica acknowledgements")

// WithReplicaAcks makes a node's answer to an acquire, an extend or a
// counter raise count only once n of that node's replicas acknowledged
// the write (Redis WAIT, within the call's node timeout); a node whose
// replicas fall short fails that call with [ErrReplicaAcks] in its
// [*NodeError]. Default 0: a primary's answer counts at once. Each node
// must then be a single server (a *redis.Client, including one from
// redis.NewFailoverClient): a Cluster or Ring client cannot send WAIT to
// the shard that took the write, and New returns [ErrInvalidArgument] for
// one, and for n < 0.
func WithReplicaAcks(n int) Option {
	return func(cfg *config) { cfg.replicaAcks = n }
}

// durable reports whether o writes what a grant or a token rests on, so
// that with replica acknowledgements it counts only once they are in.
func (o *op) durable() bool {
	return o.script == acquireScript || o.script == extendScript || o.script == reacquireScript || o.script == raiseScript
}

// needsAcks reports whether the batch live must be followed by WAIT.
func (b *batcher) needsAcks(live []*op) bool {
	if b.c.cfg.replicaAcks == 0 {
		return false
	}
	for _, o := range live {
		if o.durable() {
			return true
		}
	}
	return false
}

// waitTimeout is how long the WAIT after live may block: half the time left
// until the earliest deadline of a durable call in it. WAIT answers when the
// server's timer notices its timeout (serverCron, up to 1000/hz ms later)
// when the replicas fall short, and that answer still has its way back to
// make: the other half, which covers both on a node whose round trip is
// within half the node timeout less that period (a node slower than that
// fails calls without replicas too). An answer after the deadline is a
// timeout, like any (docs/protocol.md says what that costs). Never 0,
// which WAIT takes as "for ever".
func waitTimeout(live []*op, now time.Time) time.Duration {
	var earliest time.Time
	for _, o := range live {
		if d, ok := o.g.ctx.Deadline(); ok && o.durable() && (earliest.IsZero() || d.Before(earliest)) {
			earliest = d
		}
	}
	return max(earliest.Sub(now)/2, time.Millisecond)
}

// execAcked sends live in one pipeline followed by WAIT, on one connection
// (WAIT counts the acknowledgements of that connection's writes), and
// completes each call; a durable call's answer counts only if WAIT saw
// enough replicas. A script goes by its source until the node ran it once
// (its first call would otherwise be refused NOSCRIPT, and sent again after
// a WAIT that cost it half its time); one the node forgot since (a restart)
// is sent again with its source, in a pipeline of its own with its own WAIT.
func (b *batcher) execAcked(ctx context.Context, rdb redis.UniversalClient, live []*op) {
	var cmds []redis.Cmder
	var acks *redis.Cmd
	cmds, _ = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, o := range live {
			if _, ran := b.ran.Load(o.script); ran {
				p.EvalSha(ctx, o.script.Hash(), o.keys, o.args...)
			} else {
				o.script.Eval(ctx, p, o.keys, o.args...)
			}
		}
		acks = p.Do(ctx, "wait", b.c.cfg.replicaAcks, waitTimeout(live, time.Now()).Milliseconds())
		return nil
	})
	ackErr := b.ackError(acks)
	for i, o := range live {
		v, err := pipelineReply(cmds, i)
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			b.execAckedSource(ctx, rdb, o)
			continue
		}
		if err == nil {
			b.ran.Store(o.script, true)
		}
		b.note(o, err)
		if err == nil && o.durable() {
			err = ackErr
		}
		o.g.complete(o, v, err)
	}
}

// execAckedSource runs o by its source, then WAIT, on one connection.
func (b *batcher) execAckedSource(ctx context.Context, rdb redis.UniversalClient, o *op) {
	var run *redis.Cmd
	var acks *redis.Cmd
	_, _ = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		run = o.script.Eval(ctx, p, o.keys, o.args...)
		acks = p.Do(ctx, "wait", b.c.cfg.replicaAcks, waitTimeout([]*op{o}, time.Now()).Milliseconds())
		return nil
	})
	v, err := run.Result()
	b.note(o, err)
	if err == nil && o.durable() {
		err = b.ackError(acks)
	}
	o.g.complete(o, v, err)
}

// ackError is nil when WAIT's answer reached the replicas asked for, and
// otherwise says how many acknowledged (or why WAIT failed).
func (b *batcher) ackError(acks *redis.Cmd) error {
	n, err := acks.Int64()
	switch {
	case err != nil:
		return fmt.Errorf("%w: WAIT: %w", ErrReplicaAcks, err)
	case n < int64(b.c.cfg.replicaAcks):
		return fmt.Errorf("%w: %d of %d replicas", ErrReplicaAcks, n, b.c.cfg.replicaAcks)
	}
	return nil
}
