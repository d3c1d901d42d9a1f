package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/internal/redisproc"
)

// The replicas scenario (opt-in: --scenarios replicas) measures what
// redlock.WithReplicaAcks costs. It attaches one replica to every node
// (a redis-server on a free loopback port started with --replicaof, caught
// up before anything is measured), then measures, the libraries taking
// turns in --rounds rounds, fencedlock without acknowledgements and
// fencedlock-acks (WithReplicaAcks(1): a node's acquire counts only once
// WAIT reports its replica has it) on the same nodes, with redsync and the
// raw floor for reference (they do not wait for replicas):
//
//   - replicas: one goroutine, TryLock + Unlock on one key (p50, p99, ops/s);
//   - replicas-parallel: --goroutines goroutines, each on its own key (ops/s).
//
// The replicas are stopped at the end. It needs nodes that lockbench
// started (not --nodes), and it is opt-in because it is about one option
// and starts five more servers.
const (
	scReplicas         = "replicas"
	scReplicasParallel = "replicas-parallel"
)

// replicaScenario reports whether the rows of sc are measured with a
// replica on every node.
func replicaScenario(sc string) bool { return sc == scReplicas || sc == scReplicasParallel }

// replicaSyncTimeout bounds the wait for a replica's first sync: the time
// redisproc allows a server to start (its default StartTimeout), since the
// sync of these near-empty nodes is a start's worth of work.
const replicaSyncTimeout = 10 * time.Second

// runReplicas attaches the replicas, measures both phases and stops them.
func (e *env) runReplicas(ctx context.Context) (_ []*Result, err error) {
	if e.procs == nil {
		e.log("skipping %s: it attaches replicas to the nodes, which needs nodes started by lockbench (not --nodes)", scReplicas)
		return nil, nil
	}
	replicas, err := e.startReplicas(ctx)
	defer func() {
		for _, r := range replicas {
			err = errors.Join(err, r.Close())
		}
	}()
	if err != nil {
		return nil, err
	}
	var out []*Result
	for _, sc := range []string{scReplicas, scReplicasParallel} {
		rs, err := e.runRounds(ctx, sc)
		out = append(out, rs...)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// startReplicas starts one replica per node and waits until each reports
// its link to the node up (the first sync done). On error the replicas it
// returns are running still.
func (e *env) startReplicas(ctx context.Context) ([]*redisproc.Proc, error) {
	var replicas []*redisproc.Proc
	for _, p := range e.procs {
		// A primary that syncs without disk waits repl-diskless-sync-delay
		// (5s by default) for more replicas to share the transfer; there
		// is only ever one here.
		if err := command(ctx, p.Addr(), "config", "set", "repl-diskless-sync-delay", "0"); err != nil {
			return replicas, err
		}
		r, err := redisproc.Start(ctx, redisproc.Config{Args: []string{"--replicaof", "127.0.0.1", fmt.Sprint(p.Port())}})
		if err != nil {
			return replicas, fmt.Errorf("replica of %s: %w", p.Addr(), err)
		}
		replicas = append(replicas, r)
	}
	deadline := time.Now().Add(replicaSyncTimeout)
	for i, r := range replicas {
		if err := linkUp(ctx, r.Addr(), deadline); err != nil {
			return replicas, fmt.Errorf("replica %s of %s: %w", r.Addr(), e.procs[i].Addr(), err)
		}
	}
	e.log("%s: a replica on every node: %d servers up", scReplicas, len(replicas))
	return replicas, nil
}

// command sends one command to addr on a client of its own.
func command(ctx context.Context, addr string, args ...any) error {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	if err := c.Do(ctx, args...).Err(); err != nil {
		return fmt.Errorf("%s: %v: %w", addr, args, err)
	}
	return nil
}

// linkUp waits until the replica at addr reports master_link_status:up, or
// deadline.
func linkUp(ctx context.Context, addr string, deadline time.Time) error {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	tick := time.NewTicker(10 * time.Millisecond) // a poll rate, bounded by deadline
	defer tick.Stop()
	last := "no answer"
	for {
		info, err := c.Info(ctx, "replication").Result()
		switch {
		case err != nil:
			last = err.Error()
		case strings.Contains(info, "master_link_status:up"):
			return nil
		default:
			last = "master_link_status not up"
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("not synced after %s: %s", replicaSyncTimeout, last)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// printReplicaAcks lists, for the rows of the replicas scenario, the WAITs
// each library sent and the replicas their replies reported, per operation.
func (rep *Report) printReplicaAcks(w io.Writer) {
	var rows []*Result
	for _, r := range rep.Results {
		if replicaScenario(r.Scenario) {
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w, "\nreplica acknowledgements, per operation:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintf(tw, "  %s\t%s\tWAIT %.2f\treplicas acknowledged %.2f\n", r.Scenario, r.Library, r.Commands["wait"], r.ReplicaAcksPerOp)
	}
	tw.Flush()
}
