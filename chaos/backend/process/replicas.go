package process

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fencedlock/fencedlock/chaos/backend"
	"github.com/fencedlock/fencedlock/chaos/internal/sentinel"
)

// WithReplicas makes each node a primary with one replica, both
// redis-server processes with the append-only file on, under one Sentinel
// process (redis-server --sentinel) that monitors every pair with quorum 1.
// Sentinel's timing is derived from ttl, the largest lock TTL of the
// workload: it declares a primary down after ttl/2 (1s at least) and
// fails it over.
// Node i's address always leads to its pair's current primary (Sentinel's
// +switch-master moves it; the connections to the old primary are closed).
// Replication is asynchronous, as Redis's is.
//
// Kill, Restart, Pause and SetClockSkew act on the current primary; Start
// starts whichever server of the node is stopped, Resume resumes whichever
// is paused; Partition, latency and lost replies act between the clients
// and the node, not on replication. A fault that keeps a primary from
// Sentinel for longer than that (a kill, a pause) makes Sentinel fail
// the pair over, as in production; the server that comes back is made a
// replica by Sentinel. FailOver and Rejoin (backend.Replicated) fail a
// node over on demand. Default: plain nodes, with no replica, for which
// FailOver returns backend.ErrUnsupported.
func WithReplicas(ttl time.Duration) Option { return func(c *config) { c.replicaTTL = ttl } }

// withPair runs f on node i's pair, serialised with the node's other
// process operations; without replicas it fails with
// backend.ErrUnsupported.
func (b *Backend) withPair(i int, op string, f func(p *pair) error) error {
	return b.withProc(i, op, func(n *procNode) error {
		if n.pair == nil {
			return fmt.Errorf("%w: the backend was started without replicas", backend.ErrUnsupported)
		}
		return f(n.pair)
	})
}

// FailOver implements backend.Replicated: the primary's replication proxy
// holds back what the primary sends (to its replica and to Sentinel, which
// knows it by that address, so Sentinel's down-after runs from the start
// of the hold), lag passes, the primary is stopped (SIGSTOP), and Sentinel
// promotes the replica. Every wait is bounded by Sentinel's own timing
// (sentinel.Timing.Settle).
func (b *Backend) FailOver(ctx context.Context, i int, lag time.Duration) error {
	if lag < 0 {
		return fmt.Errorf("process: failover lag %v: want >= 0", lag)
	}
	return b.withPair(i, "fail over", func(p *pair) error {
		defer b.promos.Asking(i)()
		t := b.timing
		if err := p.waitWhole(ctx, b.sentinel, t, t.Settle()); err != nil {
			return fmt.Errorf("the pair is not whole: %w", err)
		}
		old := p.primaryIndex()
		held, stopped := p.repl[old], p.procs[old]
		held.Hold()
		err := sentinel.Sleep(ctx, lag)
		if err == nil {
			err = stopped.Pause()
		}
		if err == nil {
			err = p.waitPrimary(ctx, b.sentinel, 1-old, t, t.Settle())
		}
		if err != nil {
			// Leave the pair as it was: whichever Sentinel names, with the
			// other server running and reachable by it.
			if stopped.Paused() {
				err = errors.Join(err, stopped.Resume())
			}
			held.Release()
			return fmt.Errorf("no promotion: %w (sentinel's log ends: %s)", err, b.sentinel.logTail(8))
		}
		return nil
	})
}

// Rejoin implements backend.Replicated.
func (b *Backend) Rejoin(ctx context.Context, i int) error {
	return b.withPair(i, "rejoin", func(p *pair) error {
		for _, proc := range p.procs {
			if proc.Paused() {
				if err := proc.Resume(); err != nil {
					return err
				}
			}
		}
		for _, r := range p.repl {
			r.Release()
		}
		t := b.timing
		return p.waitWhole(ctx, b.sentinel, t, t.Settle())
	})
}

// OnPromotion implements backend.Promotions.
func (b *Backend) OnPromotion(f func(node int, at time.Time)) { b.promos.Listen(f) }
