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
const (
	scSerial     = "serial"
	scParallel   = "parallel"
	scOneKey     = "onekey"
	scPaused     = "paused"
	scPausedBase = "paused-base"
)

func allScenarios() []string { return []string{scSerial, scParallel, scOneKey, scPaused} }

// env is what every scenario runs against.
type env struct {
	opts  options
	addrs []string
	procs []*redisproc.Proc // nil when the nodes are not ours (--nodes): no pause then
	log   func(format string, args ...any)
}

// config is what every library gets in scenario sc: each library's own
// per-node timeout (TTL/20 for both quorum libraries) when all nodes are up;
// --node-timeout for both in the paused scenario, plus the same deadline on
// the calls that have none of their own (redsync's Unlock, the raw floor's).
func (e *env) config(sc string) contender.Config {
	cfg := contender.Config{TTL: e.opts.ttl, RetryDelay: e.opts.retryDelay}
	if sc == scPaused {
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
		case sc == scOneKey && l == contender.Raw: // no waiting strategy: nothing to measure
			continue
		case sc == scPaused && l == contender.Redislock: // one node, not the paused one
			continue
		case sc == scPaused && l == contender.RedsyncFailFast:
			// The variant that does not wait for every node is what this
			// scenario is about: run it whenever redsync runs.
			selected = selected || slices.Contains(e.opts.libs, contender.Redsync)
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
	if sc == scPaused {
		for _, lib := range e.libsFor(sc) {
			var rs []*Result
			if rs, err = e.runPaused(ctx, lib); err != nil {
				break
			}
			out = append(out, rs...)
		}
	} else {
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

// contestant is one library in a scenario: its instance, its workers and
// what its rounds measured so far.
type contestant struct {
	lib     string
	l       contender.Locker
	workers []*worker
	acc     phaseResult
}

func (e *env) shape(sc string) (int, loop) {
	switch sc {
	case scParallel:
		return e.opts.goroutines, acquireRelease
	case scOneKey:
		return e.opts.waiters, contended(e.opts.hold)
	}
	return 1, acquireRelease
}

// newContestant opens lib with sc's settings and one Session per worker, on
// keys of phase's own (nothing one phase left on a node — a release that
// lost a race — can then refuse the next).
func (e *env) newContestant(sc, phase, lib string) (*contestant, error) {
	l, err := contender.New(lib, e.addrs, e.config(sc))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", lib, err)
	}
	n, _ := e.shape(sc)
	c := &contestant{lib: lib, l: l, workers: make([]*worker, n)}
	for g := range c.workers {
		key := "lockbench:" + phase + ":" + lib
		if sc == scParallel {
			key += ":" + strconv.Itoa(g)
		}
		c.workers[g] = &worker{s: l.Session(key)}
	}
	return c, nil
}

func (e *env) runRounds(ctx context.Context, sc string) (_ []*Result, err error) {
	_, body := e.shape(sc)
	var cs []*contestant
	defer func() {
		for _, c := range cs {
			err = errors.Join(err, c.l.Close())
		}
	}()
	for _, lib := range e.libsFor(sc) {
		c, err := e.newContestant(sc, sc, lib)
		if err != nil {
			return nil, err
		}
		cs = append(cs, c)
	}
	rounds := e.opts.rounds
	d := e.opts.duration / time.Duration(rounds)
	budget := (e.opts.ops + int64(rounds) - 1) / int64(rounds)
	for r := range rounds {
		warmup := time.Duration(0)
		if r == 0 {
			warmup = e.opts.warmup
		}
		order := slices.Clone(cs)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, c := range order {
			c.acc.add(runPhase(ctx, c.l, c.workers, warmup, d, budget, body))
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
	}
	out := make([]*Result, len(cs))
	for i, c := range cs {
		out[i] = newResult(sc, c.lib, c.acc)
	}
	return out, nil
}

// runPaused measures lib with all nodes up (paused-base), then with one node
// stopped by SIGSTOP (paused), on the same instance with the same settings.
func (e *env) runPaused(ctx context.Context, lib string) (_ []*Result, err error) {
	_, body := e.shape(scPaused)
	phase := func(name string) (*Result, error) {
		c, err := e.newContestant(scPaused, name, lib)
		if err != nil {
			return nil, err
		}
		defer func() { err = errors.Join(err, c.l.Close()) }()
		pr := runPhase(ctx, c.l, c.workers, e.opts.warmup, e.opts.duration, e.opts.ops, body)
		return newResult(name, lib, pr), ctx.Err()
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
