package docker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/moby/moby/client"

	"github.com/fencedlock/fencedlock/chaos/backend"
	"github.com/fencedlock/fencedlock/chaos/internal/faketime"
)

// withNode runs f on node i, serialised with the node's other container
// operations, and wraps its error.
//
// f gets a context that ctx's cancellation does not reach, bounded by a
// timeout of its own: Docker operations take a while, and one cut short half
// way (the end of a chaos run landing in the middle of a partition, say)
// would leave the node changed with no record of it, and so with no undo.
func (d *Backend) withNode(ctx context.Context, i int, op string, f func(ctx context.Context, n *dockerNode) error) error {
	n, err := d.node(i)
	if err != nil {
		return fmt.Errorf("docker: %s: %w", op, err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*d.cfg.startTimeout+time.Minute)
	defer cancel()
	if err := f(ctx, n); err != nil {
		return fmt.Errorf("docker: %s node %d: %w", op, i, err)
	}
	return nil
}

// Kill implements Backend: docker kill (of a pair, of its primary).
func (d *Backend) Kill(ctx context.Context, i int) error {
	return d.withNode(ctx, i, "kill", func(ctx context.Context, n *dockerNode) error {
		if p := n.pair; p != nil {
			return d.killServer(ctx, p, p.primaryIndex())
		}
		if !n.running {
			return nil
		}
		return n.kill(ctx)
	})
}

// Start implements Backend: docker start.
func (d *Backend) Start(ctx context.Context, i int) error {
	return d.withNode(ctx, i, "start", func(ctx context.Context, n *dockerNode) error {
		if p := n.pair; p != nil {
			for s := range p.servers {
				if err := d.startStopped(ctx, p, s); err != nil {
					return err
				}
			}
			return nil
		}
		if n.running {
			return nil
		}
		return n.start(ctx)
	})
}

// Restart implements Backend: kill and start with data; without, a new
// container on a new, empty volume (of a pair, the primary is killed, its
// data directory replaced by an empty one, and it is started again: see
// WithReplicas).
func (d *Backend) Restart(ctx context.Context, i int, withData bool) error {
	return d.withNode(ctx, i, "restart", func(ctx context.Context, n *dockerNode) error {
		if p := n.pair; p != nil {
			prim := p.primaryIndex()
			if err := d.killServer(ctx, p, prim); err != nil {
				return err
			}
			if !withData {
				// Left stopped on failure, with its data, as a process
				// node whose data could not be wiped.
				if err := d.newGeneration(ctx, p.servers[prim]); err != nil {
					return err
				}
			}
			return d.startStopped(ctx, p, prim)
		}
		if !withData {
			return n.recreate(ctx, false)
		}
		if err := n.kill(ctx); err != nil {
			return err
		}
		return n.start(ctx)
	})
}

// Pause implements Backend: docker pause (of a pair, of its primary).
func (d *Backend) Pause(ctx context.Context, i int) error {
	return d.withNode(ctx, i, "pause", func(ctx context.Context, n *dockerNode) error {
		if n.pair != nil {
			return d.pauseServer(ctx, n.pair.servers[n.pair.primaryIndex()])
		}
		if !n.running {
			return backend.ErrNotRunning
		}
		if n.paused {
			return nil
		}
		if _, err := d.cli.ContainerPause(ctx, n.ctr.GetContainerID(), client.ContainerPauseOptions{}); err != nil {
			return err
		}
		n.paused = true
		return nil
	})
}

// Resume implements Backend: docker unpause.
func (d *Backend) Resume(ctx context.Context, i int) error {
	return d.withNode(ctx, i, "resume", func(ctx context.Context, n *dockerNode) error {
		if p := n.pair; p != nil {
			// Whichever is paused: Sentinel may have failed the pair over
			// meanwhile, and then makes the resumed server a replica.
			resumed := false
			for _, srv := range p.servers {
				resumed = resumed || srv.paused
				if err := d.resumeServer(ctx, srv); err != nil {
					return err
				}
			}
			if !resumed && !p.servers[p.primaryIndex()].running {
				return backend.ErrNotRunning
			}
			return nil
		}
		if !n.running {
			return backend.ErrNotRunning
		}
		if !n.paused {
			return nil
		}
		if _, err := d.cli.ContainerUnpause(ctx, n.ctr.GetContainerID(), client.ContainerUnpauseOptions{}); err != nil {
			return err
		}
		n.paused = false
		return nil
	})
}

// Partition implements Backend: the proxy drops every byte at once, then
// the container is disconnected from its network.
func (d *Backend) Partition(ctx context.Context, i int) error {
	n, err := d.node(i)
	if err != nil {
		return fmt.Errorf("docker: partition: %w", err)
	}
	n.net.SetPartitioned(true)
	if n.pair != nil {
		return nil // the proxy only: the pair stays whole behind it
	}
	return d.withNode(ctx, i, "partition", func(ctx context.Context, n *dockerNode) error {
		n.partitioned = true
		if err := n.cut(ctx); err != nil {
			// Not partitioned then: a failed fault gets no undo.
			n.partitioned = false
			n.net.SetPartitioned(false)
			return err
		}
		return nil
	})
}

// Heal implements Backend: the container is connected again with its alias
// and, once it answers on its new published port, the proxy lets bytes
// through. The proxy lets them through even if reconnecting failed (the
// error is returned): a node left cut off for good would be a fault nobody
// planned.
func (d *Backend) Heal(ctx context.Context, i int) error {
	n, err := d.node(i)
	if err != nil {
		return fmt.Errorf("docker: heal: %w", err)
	}
	defer n.net.SetPartitioned(false)
	return d.withNode(ctx, i, "heal", func(ctx context.Context, n *dockerNode) error {
		n.partitioned = false
		return n.join(ctx)
	})
}

// DropReplies implements backend.Proxied: the proxy passes requests and
// drops every byte the node sends back.
func (d *Backend) DropReplies(_ context.Context, i int, drop bool) error {
	n, err := d.node(i)
	if err != nil {
		return fmt.Errorf("docker: drop replies: %w", err)
	}
	n.net.SetDropReplies(drop)
	return nil
}

// Blackhole implements backend.Proxied: the proxy drops every byte both
// ways, and nothing else changes.
func (d *Backend) Blackhole(_ context.Context, i int, on bool) error {
	n, err := d.node(i)
	if err != nil {
		return fmt.Errorf("docker: blackhole: %w", err)
	}
	n.net.SetPartitioned(on)
	return nil
}

// SetLatency implements Backend: the proxy holds each request for d/2 and
// each reply for the other half.
func (d *Backend) SetLatency(_ context.Context, i int, lat time.Duration) error {
	if lat < 0 {
		return fmt.Errorf("docker: latency %v: want >= 0", lat)
	}
	n, err := d.node(i)
	if err != nil {
		return fmt.Errorf("docker: latency: %w", err)
	}
	n.net.SetLatency(lat)
	return nil
}

// SetClockSkew implements Backend: the container is recreated on its volume
// (so with its data) with libfaketime preloaded, or without it for "". Of
// a pair, whose containers are never created anew, both servers get the
// clock in their files (see WithReplicas): the primary is killed and
// started again on it now, with its data, the replica at its next start,
// as in package process.
func (d *Backend) SetClockSkew(ctx context.Context, i int, spec string) error {
	if spec != "" {
		if err := faketime.CheckSpec(spec); err != nil {
			return err
		}
		if !d.faketime {
			return fmt.Errorf("docker: clock skew %q on node %d: image %s has no %s: %w", spec, i, d.cfg.image, faketimePath, backend.ErrNoFaketime)
		}
	}
	return d.withNode(ctx, i, "clock skew", func(ctx context.Context, n *dockerNode) error {
		if p := n.pair; p != nil {
			return d.skewPair(ctx, n, p, spec)
		}
		old := n.skew
		n.skew = spec
		if err := n.recreate(ctx, true); err != nil {
			// Leave the node stopped, but let a later Start run it on the
			// clock it had before.
			n.skew = old
			return err
		}
		return nil
	})
}

// skewPair is SetClockSkew of a pair. On failure the files say the clock
// the node had before, and the primary may be left stopped: a later Start
// runs it on that clock.
func (d *Backend) skewPair(ctx context.Context, n *dockerNode, p *pair, spec string) error {
	setAll := func(ctx context.Context, spec string) error {
		var errs []error
		for _, srv := range p.servers {
			errs = append(errs, d.setClock(ctx, srv, spec))
		}
		return errors.Join(errs...)
	}
	err := setAll(ctx, spec)
	if err == nil {
		prim := p.primaryIndex()
		if err = d.killServer(ctx, p, prim); err == nil {
			err = d.startStopped(ctx, p, prim)
		}
	}
	if err != nil {
		return errors.Join(err, setAll(context.WithoutCancel(ctx), n.skew))
	}
	n.skew = spec
	return nil
}
