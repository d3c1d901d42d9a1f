package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fencedlock/fencedlock/bench/contender"
	"github.com/fencedlock/fencedlock/internal/redisproc"
)

// Scenario names, as in --scenarios, the JSON and the table. The paused
// scenario yields two rows per library: paused-base (all nodes up) and
// paused (one node stopped with SIGSTOP), with the same client settings.
// The multiclient scenario yields two too: multiclient (all nodes up) and
// multiclient-down (one node killed), with the same clients; and so does
// multiclient-defaults, the same with each library's default node timeout.
// The replicas scenario (replicas.go) yields replicas (serial) and
// replicas-parallel.
const (
	scSerial          = "serial"
	scParallel        = "parallel"
	scOneKey          = "onekey"
	scPaused          = "paused"
	scPausedBase      = "paused-base"
	scMultiClient     = "multiclient"
	scMultiClientDown = "multiclient-down"

	scMultiClientDefaults     = "multiclient-defaults"
	scMultiClientDefaultsDown = "multiclient-defaults-down"
)

func allScenarios() []string {
	return []string{scSerial, scParallel, scOneKey, scPaused, scMultiClient, scMultiClientDefaults}
}

// optInScenarios run only when --scenarios names them: manyholds takes
// long, replicas is about one option (see each one's file).
func optInScenarios() []string { return []string{scManyHolds, scReplicas} }

// multiClientScenario reports whether sc is one of the multiclient
// scenarios (see multiclient.go), which differ only in their node timeout.
func multiClientScenario(sc string) bool { return sc == scMultiClient || sc == scMultiClientDefaults }

// contendedScenario reports whether the rows of sc measure waits for one
// key (blocking Lock), with fairness and a wait distribution.
func contendedScenario(sc string) bool {
	return sc == scOneKey || multiClientScenario(sc) || sc == scMultiClientDown || sc == scMultiClientDefaultsDown
}

// env is what every scenario runs against.
type env struct {
	opts  options
	addrs []string
	procs []*redisproc.Proc // nil when the nodes are not ours (--nodes): no pause or kill then
	log   func(format string, args ...any)
}

// config is what every library gets in scenario sc: each library's own
// per-node timeout (TTL/20 for both quorum libraries) when all nodes are up,
// and in multiclient-defaults, which takes a node away with the defaults a
// user runs; --node-timeout for both in the other scenarios that take a
// node away (paused, multiclient), plus the same deadline on the calls that
// have none of their own (redsync's Unlock, the raw floor's).
func (e *env) config(sc string) contender.Config {
	cfg := contender.Config{TTL: e.opts.ttl, RetryDelay: e.opts.retryDelay}
	if sc == scPaused || sc == scMultiClient {
		cfg.NodeTimeout = e.opts.nodeTimeout
		cfg.CallTimeout = e.opts.nodeTimeout
	}
	return cfg
}

// libsFor returns the selected libraries that take part in scenario sc.
func (e *env) libsFor(sc string) []string {
	var libs []string
	for _, l := range contender.Names() {
		selected := slices.Contains(e.opts.libs, l)
		switch {
		case contendedScenario(sc) && l == contender.Raw: // no waiting strategy: nothing to measure
			continue
		case multiClientScenario(sc) && l == contender.Redislock: // one node: nothing for a node-down phase to say
			continue
		case sc == scPaused && l == contender.Redislock: // one node, not the paused one
			continue
		case sc == scPaused && l == contender.RedsyncFailFast:
			// The variant that does not wait for every node is what this
			// scenario is about: run it whenever redsync runs.
			selected = selected || slices.Contains(e.opts.libs, contender.Redsync)
		case !replicaScenario(sc) && l == contender.FencedlockAcks: // no replicas: every acquire would fail
			continue
		case l == contender.FencedlockAcks:
			// What the replicas scenario is about: run it whenever
			// fencedlock runs.
			selected = selected || slices.Contains(e.opts.libs, contender.Fencedlock)
		}
		if selected {
			libs = append(libs, l)
		}
	}
	return libs
}

// runScenario measures every library of sc. Serial, parallel and onekey
// run in rounds (--rounds), the libraries in turn and in reverse order every
// other round, so that a drift of the machine during the run (another
// process, a warming CPU) falls on all of them alike. Paused runs each library
// once: a baseline with all nodes up, then with one node stopped.
func (e *env) runScenario(ctx context.Context, sc string) ([]*Result, error) {
	if sc == scPaused && e.procs == nil {
		e.log("skipping %s: it pauses a node, which needs nodes started by lockbench (not --nodes)", sc)
		return nil, nil
	}
	var (
		out []*Result
		err error
	)
	switch sc {
	case scPaused:
		for _, lib := range e.libsFor(sc) {
			var rs []*Result
			if rs, err = e.runPaused(ctx, lib); err != nil {
				break
			}
			out = append(out, rs...)
		}
	case scMultiClient, scMultiClientDefaults:
		out, err = e.runMultiClient(ctx, sc)
	case scReplicas:
		out, err = e.runReplicas(ctx)
	default:
		out, err = e.runRounds(ctx, sc)
	}
	for _, r := range out {
		e.log("%-11s %-17s %8d ops  %9.0f ops/s  p50 %-9s p99 %-9s errors %d %s", r.Scenario, r.Library, r.Ops, r.OpsPerSec,
			fmtDur(r.p50), fmtDur(r.p99), r.Errors, firstLine(r.FirstError))
	}
	if err != nil {
		return out, fmt.Errorf("%s: %w", sc, err)
	}
	return out, nil
}

// contestant is one library in a scenario: its instances (one, or one per
// client in multiclient), its workers and what its rounds measured so far.
type contestant struct {
	lib     string
	ls      []contender.Locker
	workers []*worker // worker g runs on ls[g/(len(workers)/len(ls))]
	acc     phaseResult
}

// counts sums what every instance sent so far.
func (c *contestant) counts() contender.Counts {
	sum := contender.Counts{Commands: map[string]int64{}}
	for _, l := range c.ls {
		n := l.Counts()
		sum.Trips += n.Trips
		sum.ReplicaAcks += n.ReplicaAcks
		for k, v := range n.Commands {
			sum.Commands[k] += v
		}
	}
	return sum
}

func (c *contestant) close() error {
	var errs []error
	for _, l := range c.ls {
		errs = append(errs, l.Close())
	}
	return errors.Join(errs...)
}

// shape returns how many instances of a library sc opens, how many workers
// each, and their loop.
func (e *env) shape(sc string) (instances, perInstance int, body loop) {
	switch sc {
	case scParallel, scReplicasParallel:
		return 1, e.opts.goroutines, acquireRelease
	case scOneKey:
		return 1, e.opts.waiters, contended(e.opts.hold)
	case scMultiClient, scMultiClientDefaults:
		return e.opts.clients, e.opts.clientGoroutines, contended(e.opts.hold)
	}
	return 1, 1, acquireRelease
}

// newContestant opens lib with sc's settings — as many instances as sc
// wants, each with its own go-redis clients, as separate processes would
// have — and one Session per worker on keys of phase's own.
func (e *env) newContestant(sc, phase, lib string) (*contestant, error) {
	k, _, _ := e.shape(sc)
	c := &contestant{lib: lib}
	for range k {
		l, err := contender.New(lib, e.addrs, e.config(sc))
		if err != nil {
			return nil, errors.Join(fmt.Errorf("%s: %w", lib, err), c.close())
		}
		c.ls = append(c.ls, l)
	}
	e.openSessions(c, sc, phase)
	return c, nil
}

// openSessions gives c fresh workers, with one Session each on keys of
// phase's own (nothing one phase left on a node — a release that lost a race
// — can then refuse the next), and forgets what c measured so far.
func (e *env) openSessions(c *contestant, sc, phase string) {
	_, per, _ := e.shape(sc)
	c.workers = make([]*worker, len(c.ls)*per)
	c.acc = phaseResult{}
	for g := range c.workers {
		key := "lockbench:" + phase + ":" + c.lib
		if sc == scParallel || sc == scReplicasParallel {
			key += ":" + strconv.Itoa(g)
		}
		c.workers[g] = &worker{s: c.ls[g/per].Session(key)}
	}
}

func (e *env) runRounds(ctx context.Context, sc string) (_ []*Result, err error) {
	cs, err := e.newContestants(sc)
	defer func() { err = errors.Join(err, closeAll(cs)) }()
	if err != nil {
		return nil, err
	}
	if err := e.playRounds(ctx, sc, cs, e.opts.warmup); err != nil {
		return nil, err
	}
	return results(sc, cs), nil
}

// newContestants opens every library of sc, on keys named for sc. On error
// the ones it returns are open still.
func (e *env) newContestants(sc string) ([]*contestant, error) {
	var cs []*contestant
	for _, lib := range e.libsFor(sc) {
		c, err := e.newContestant(sc, sc, lib)
		if err != nil {
			return cs, err
		}
		cs = append(cs, c)
	}
	return cs, nil
}

func closeAll(cs []*contestant) error {
	var errs []error
	for _, c := range cs {
		errs = append(errs, c.close())
	}
	return errors.Join(errs...)
}

// playRounds measures cs in --rounds rounds, adding to each one's acc, each
// after warmup in its first round.
func (e *env) playRounds(ctx context.Context, sc string, cs []*contestant, warmup time.Duration) error {
	_, _, body := e.shape(sc)
	rounds := e.opts.rounds
	d := e.opts.duration / time.Duration(rounds)
	budget := (e.opts.ops + int64(rounds) - 1) / int64(rounds)
	for r := range rounds {
		if r > 0 {
			warmup = 0
		}
		order := slices.Clone(cs)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, c := range order {
			c.acc.add(runPhase(ctx, c.counts, c.workers, warmup, d, budget, body))
			if err := ctx.Err(); err != nil {
				return err
			}
		}
	}
	return nil
}

// results turns what cs measured into rows of scenario sc.
func results(sc string, cs []*contestant) []*Result {
	out := make([]*Result, len(cs))
	for i, c := range cs {
		out[i] = newResult(sc, c.lib, c.acc, len(c.ls))
	}
	return out
}

// runPaused measures lib with all nodes up (paused-base), then with one node
// stopped by SIGSTOP (paused), on the same instance with the same settings.
func (e *env) runPaused(ctx context.Context, lib string) (_ []*Result, err error) {
	_, _, body := e.shape(scPaused)
	phase := func(name string) (_ *Result, err error) {
		c, err := e.newContestant(scPaused, name, lib)
		if err != nil {
			return nil, err
		}
		defer func() { err = errors.Join(err, c.close()) }()
		pr := runPhase(ctx, c.counts, c.workers, e.opts.warmup, e.opts.duration, e.opts.ops, body)
		return newResult(name, lib, pr, 1), ctx.Err()
	}
	base, err := phase(scPausedBase)
	if err != nil {
		return nil, err
	}
	p := e.procs[e.pausedNode()]
	if err := p.Pause(); err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, p.Resume()) }()
	paused, err := phase(scPaused)
	if err != nil {
		return nil, err
	}
	return []*Result{base, paused}, nil
}

func (e *env) pausedNode() int { return len(e.procs) - 1 }

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " …"
	}
	return s
}
