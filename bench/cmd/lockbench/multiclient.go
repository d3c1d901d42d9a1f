package main

import (
	"context"
	"errors"
	"time"
)

// The multiclient scenario: --clients separate instances of each library,
// each with its own go-redis clients and its own library state (fencedlock's
// local wait queue and release subscriber, redsync's pools), as that many
// processes would have, with --client-goroutines goroutines each, all on ONE
// key: blocking Lock, hold --hold, Unlock, again. Waiters in different
// instances cannot queue behind one another locally: they meet only on the
// nodes, where a split vote leaves nobody with a quorum.
//
// Two phases on the same instances, each on a key of its own (and a warm-up
// on another), the libraries taking turns in --rounds rounds: multiclient with every node up, then
// multiclient-down with the last node killed (SIGKILL: its connections
// drop, new ones are refused) for the whole phase. The node is started
// again afterwards, empty (the nodes keep no data), so that nothing after
// this scenario finds one missing.
//
// multiclient gives both libraries --node-timeout; multiclient-defaults
// (phases multiclient-defaults and multiclient-defaults-down) is the same
// with each library's default node timeout, as a user who sets none runs
// it (TTL/20 for both).

// runMultiClient measures both phases of sc (scMultiClient or
// scMultiClientDefaults); without nodes of its own (--nodes) only the first.
func (e *env) runMultiClient(ctx context.Context, sc string) (_ []*Result, err error) {
	downPhase := scMultiClientDown
	if sc == scMultiClientDefaults {
		downPhase = scMultiClientDefaultsDown
	}
	cs, err := e.newContestants(sc)
	defer func() { err = errors.Join(err, closeAll(cs)) }()
	if err != nil {
		return nil, err
	}
	if err := e.warmUp(ctx, cs, sc); err != nil {
		return nil, err
	}
	if err := e.playRounds(ctx, scMultiClient, cs, 0); err != nil {
		return nil, err
	}
	out := results(sc, cs)
	if e.procs == nil {
		e.log("skipping %s: it kills a node, which needs nodes started by lockbench (not --nodes)", downPhase)
		return out, nil
	}

	down := e.procs[e.killedNode()]
	if err := down.Kill(); err != nil {
		return out, err
	}
	defer func() {
		// Close the instances first, so that nothing of this scenario
		// reaches the node once it is back.
		err = errors.Join(err, closeAll(cs))
		cs = nil
		if ctx.Err() == nil { // else the run ends here, and the nodes with it
			err = errors.Join(err, down.StartStopped(ctx))
		}
	}()
	if err := e.warmUp(ctx, cs, downPhase); err != nil {
		return out, err
	}
	if err := e.playRounds(ctx, scMultiClient, cs, 0); err != nil {
		return out, err
	}
	for _, r := range results(downPhase, cs) {
		r.NodesDown = 1
		out = append(out, r)
	}
	return out, nil
}

// warmUp runs each of cs for --warmup (it dials connections, loads scripts,
// and after the kill finds the node gone) on a key of its own, so that a
// Lock cut off by the warm-up's end — its SET sent, the reply abandoned —
// cannot leave the measured key taken; then it opens the sessions of phase.
func (e *env) warmUp(ctx context.Context, cs []*contestant, phase string) error {
	_, _, body := e.shape(scMultiClient)
	for _, c := range cs {
		if e.opts.warmup > 0 {
			e.openSessions(c, scMultiClient, phase+":warmup")
			runWorkers(ctx, c.workers, &limit{ctx: ctx, deadline: time.Now().Add(e.opts.warmup)}, body)
		}
		e.openSessions(c, scMultiClient, phase)
	}
	return ctx.Err()
}

// killedNode is the node the down phase kills: the last, which redislock
// (on the first) never uses, like the paused scenario's.
func (e *env) killedNode() int { return len(e.procs) - 1 }
