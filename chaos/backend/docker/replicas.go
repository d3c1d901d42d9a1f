package docker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/moby/moby/client"

	"github.com/fencedlock/fencedlock/chaos/backend"
	"github.com/fencedlock/fencedlock/chaos/internal/sentinel"
)

// WithReplicas makes each node a primary with one replica, two containers
// with the append-only file on, under one Sentinel container that monitors
// every pair with quorum 1, all on the Backend's network. Sentinel's
// timing is derived from ttl, the largest lock TTL of the workload, as in
// process.WithReplicas: it declares a primary down after ttl/2 (1s at
// least) and fails it over. Node i's address always leads to its pair's
// current primary (Sentinel's +switch-master moves the relay to the port
// Docker publishes for it; the connections to the old primary are closed).
// Replication is asynchronous, as Redis's is.
//
// FailOver and Rejoin (backend.Replicated) fail a node over on demand.
// Kill, Restart, Pause and SetClockSkew act on the current primary, as in
// package process: docker kill; kill and start (the data stays in the
// container); docker pause. Start starts whichever server is stopped,
// Resume resumes whichever is paused. A pair's containers are never
// created anew, and each has a fixed address on the network, where
// Sentinel knows it (see claimSubnet): a restart without data points the
// primary's data directory at an empty one while it is stopped, and a
// clock skew writes libfaketime's preload and spec into the files of both
// servers and kills and starts the primary, with its data, on it (the
// replica takes it at its next start). A fault that keeps the primary from
// Sentinel for longer than its down-after makes Sentinel fail the pair
// over, as in production, and the server that comes back (each starts as a
// primary) is made a replica by Sentinel; a primary back sooner, empty,
// is the primary still, and its replica synchronises from it, empty too.
// Partition, latency and lost replies act between the clients and the
// node, in the proxy, not on replication (the containers stay on their
// network). Default: plain nodes, with no replica, for which FailOver
// returns backend.ErrUnsupported.
func WithReplicas(ttl time.Duration) Option { return func(c *config) { c.replicaTTL = ttl } }

// withPair runs f on node i's pair, as withNode; without replicas it
// fails with backend.ErrUnsupported.
func (d *Backend) withPair(ctx context.Context, i int, op string, f func(ctx context.Context, p *pair) error) error {
	return d.withNode(ctx, i, op, func(ctx context.Context, n *dockerNode) error {
		if n.pair == nil {
			return fmt.Errorf("%w: the backend was started without replicas", backend.ErrUnsupported)
		}
		return f(ctx, n.pair)
	})
}

// FailOver implements backend.Replicated: the primary switches off the
// ACL users its replica and Sentinel connect as and closes their
// connections (Sentinel's down-after runs from then, as it gets no valid
// reply), so that nothing it acknowledges from then on reaches them; lag
// passes; the primary's container is paused (docker pause); and Sentinel
// promotes the replica. Every wait is bounded by Sentinel's own timing
// (sentinel.Timing.Settle).
func (d *Backend) FailOver(ctx context.Context, i int, lag time.Duration) error {
	if lag < 0 {
		return fmt.Errorf("docker: failover lag %v: want >= 0", lag)
	}
	return d.withPair(ctx, i, "fail over", func(ctx context.Context, p *pair) error {
		defer d.promos.Asking(i)()
		t := d.timing
		if err := p.waitWhole(ctx, d.sentinel.Client, t, t.Settle()); err != nil {
			return fmt.Errorf("the pair is not whole: %w", err)
		}
		old := p.primaryIndex()
		err := p.holdBack(ctx, old, t.DownAfter)
		if err == nil {
			err = sentinel.Sleep(ctx, lag)
		}
		if err == nil {
			err = d.pauseServer(ctx, p.servers[old])
		}
		if err == nil {
			err = p.waitPrimary(ctx, d.sentinel.Client, 1-old, t, t.Settle())
		}
		if err != nil {
			// Leave the pair as it was: whichever Sentinel names, with the
			// other server running and reachable by it.
			if rerr := d.resumeServer(ctx, p.servers[old]); rerr != nil {
				err = fmt.Errorf("%w; resume: %w", err, rerr)
			} else if lerr := p.letThrough(ctx, old, t.DownAfter); lerr != nil {
				err = fmt.Errorf("%w; let through: %w", err, lerr)
			}
			return fmt.Errorf("no promotion: %w (sentinel's log ends: %s)", err, d.sentinel.logTail(ctx))
		}
		return nil
	})
}

// Rejoin implements backend.Replicated: the old primary is resumed and
// lets its replica's and Sentinel's users in again; what it held back
// never leaves it (Sentinel makes it a replica of the new primary, which
// it synchronises from in full).
func (d *Backend) Rejoin(ctx context.Context, i int) error {
	return d.withPair(ctx, i, "rejoin", func(ctx context.Context, p *pair) error {
		t := d.timing
		for s, srv := range p.servers {
			if err := d.resumeServer(ctx, srv); err != nil {
				return err
			}
			if err := p.letThrough(ctx, s, t.DownAfter); err != nil {
				return err
			}
		}
		return p.waitWhole(ctx, d.sentinel.Client, t, t.Settle())
	})
}

// killServer is docker kill of server s of p. The node's mu must be held.
func (d *Backend) killServer(ctx context.Context, p *pair, s int) error {
	srv := p.servers[s]
	if !srv.running {
		return nil
	}
	// First, so that no new connection goes to a port Docker may hand to
	// another container.
	p.setPublished(s, "")
	_, err := d.cli.ContainerKill(ctx, srv.ctr.GetContainerID(), client.ContainerKillOptions{Signal: "KILL"})
	if err != nil {
		// Not running (it died by itself, say) is what kill wants.
		st, serr := srv.ctr.State(ctx)
		if serr != nil || st.Running {
			return fmt.Errorf("kill container: %w", err)
		}
	}
	srv.running, srv.paused = false, false
	return nil
}

// startStopped starts server s of p again if it is stopped (its data kept
// in the container), waits until it answers on its new published port,
// and checks that it kept its fixed address on the network, where its
// peer and Sentinel know it. The node's mu must be held.
func (d *Backend) startStopped(ctx context.Context, p *pair, s int) error {
	srv := p.servers[s]
	if srv.running {
		return nil
	}
	if err := srv.ctr.Start(ctx); err != nil {
		return fmt.Errorf("start container: %w", err)
	}
	addr, err := readyAddr(ctx, srv.ctr, d.host, d.cfg.startTimeout)
	if err == nil {
		var ip string
		if ip, err = d.networkIP(ctx, srv.ctr); err == nil && ip != srv.ip {
			err = fmt.Errorf("its address on the network moved from %s to %s, where Sentinel does not look", srv.ip, ip)
		}
	}
	srv.running = true
	if err != nil {
		return errors.Join(err, d.killServer(context.WithoutCancel(ctx), p, s))
	}
	p.setPublished(s, addr)
	return nil
}

// pauseServer is docker pause. The node's mu must be held.
func (d *Backend) pauseServer(ctx context.Context, s *server) error {
	if !s.running {
		return backend.ErrNotRunning
	}
	if s.paused {
		return nil
	}
	if _, err := d.cli.ContainerPause(ctx, s.ctr.GetContainerID(), client.ContainerPauseOptions{}); err != nil {
		return err
	}
	s.paused = true
	return nil
}

// resumeServer is docker unpause of a paused server. The node's mu must
// be held.
func (d *Backend) resumeServer(ctx context.Context, s *server) error {
	if !s.paused {
		return nil
	}
	if _, err := d.cli.ContainerUnpause(ctx, s.ctr.GetContainerID(), client.ContainerUnpauseOptions{}); err != nil {
		return err
	}
	s.paused = false
	return nil
}

// OnPromotion implements backend.Promotions.
func (d *Backend) OnPromotion(f func(node int, at time.Time)) { d.promos.Listen(f) }
