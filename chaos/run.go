package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/chaos/backend"
	"github.com/fencedlock/fencedlock/chaos/backend/process"
	"github.com/fencedlock/fencedlock/chaos/checker"
	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/history"
	"github.com/fencedlock/fencedlock/chaos/recorder"
	"github.com/fencedlock/fencedlock/chaos/report"
	"github.com/fencedlock/fencedlock/chaos/schedule"
	"github.com/fencedlock/fencedlock/clock"
	"github.com/fencedlock/fencedlock/internal/redisproc"
)

// Run starts the nodes, runs the workload for cfg.Duration while the
// seeded fault schedule runs, checks the history and returns the run, ready
// for the report writers. The nodes and the store are gone when it returns.
//
// An error with an empty run means the run could not be carried out (no
// redis-server, no Docker). An error wrapping ErrInjection comes with the
// whole run: some faults could not be injected or undone, each listed in the
// error and in the run's history, whose verdict is then unknown unless a
// violation shows anyway. Violations are in the result, not in the error.
func Run(ctx context.Context, cfg Config) (report.Run, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return report.Run{}, err
	}
	if os.Getenv(ClientProcEnv) != "" {
		// A program that does not call ClientMain would start runs of its own.
		return report.Run{}, fmt.Errorf("chaos: this is a client process (%s is set): the program must call chaos.ClientMain first", ClientProcEnv)
	}
	if err := cfg.canHunt(); err != nil {
		return report.Run{}, err
	}
	b, err := newBackend(ctx, cfg)
	if err != nil {
		return report.Run{}, err
	}
	defer b.Close()

	// The store is not part of the experiment: its own server, no faults.
	storeProc, err := redisproc.Start(ctx, redisproc.Config{AOF: true})
	if err != nil {
		return report.Run{}, fmt.Errorf("chaos: store: %w", err)
	}
	defer storeProc.Close()
	storeRDB := redis.NewClient(&redis.Options{Addr: storeProc.Addr()})
	defer storeRDB.Close()
	spec, _ := lockSpecOf(cfg.Lock) // checked by withDefaults
	st := newStore(storeRDB, HasToken(cfg.Lock))

	plan, err := nodePlan(cfg)
	if err != nil {
		return report.Run{}, err
	}

	mem := recorder.NewMemory()
	rec := recorder.New(mem, recorder.WithNodes(cfg.Nodes))
	var (
		clients []*client
		procs   *procSet
		arm     func(fault.Kind, int)
		trig    acquireTrigger
		stats   = mem.Stats
	)
	if cfg.ClientProcs {
		if procs, err = startProcs(ctx, cfg, b, storeProc.Addr(), rec, mem); err != nil {
			return report.Run{}, err
		}
		defer procs.kill()
		arm, stats = procs.arm, procs.stats
		if procs.trig != nil {
			trig = procs.trig
		}
	} else {
		if clients, err = startClients(cfg, backend.Addrs(b), rec, st); err != nil {
			return report.Run{}, err
		}
		defer func() {
			for _, c := range clients {
				c.close()
			}
		}()
		if spec.fencedlock { // probes read redlock's hold values (see ownBefore)
			probe := newProber(b, cfg)
			defer probe.close()
			for _, c := range clients {
				c.probe = probe
			}
		}
		arm = func(kind fault.Kind, i int) {
			switch kind {
			case fault.ClientPause:
				clients[i].pauseNext.Store(true)
			case fault.ClientClockSkew:
				clients[i].skewNext.Store(true)
			case fault.LateWrite:
				clients[i].lateNext.Store(true)
			}
		}
		if cfg.has(fault.KillDuringAcquire) {
			trig = newHookTrigger(b, clients[0])
		}
	}

	runCtx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	opts := cfg.CheckOptions()
	if procs != nil {
		procs.runCtx = runCtx
		procs.begin()
	}
	faults := &faultLog{rec: rec, runCtx: runCtx}
	if p, ok := b.(backend.Promotions); ok {
		// A promotion no failover fault asked for (another fault kept a
		// primary from Sentinel past its down-after) lost what the
		// replica lacked: it is recorded as the failover it was.
		p.OnPromotion(func(node int, at time.Time) { faults.record(fault.Failover, node, at, at, nil) })
		defer p.OnPromotion(nil) // on an early return; the history is read after the one below
	}
	heals := newHealLoss(runCtx, cfg, plan, rec)
	for _, c := range clients {
		heals.watch(c)
	}
	start := time.Now()
	var wg sync.WaitGroup
	wg.Go(func() {
		// Every failure is in the events too: faults keeps them.
		_ = schedule.Run(runCtx, b, plan, func(ev schedule.FaultEvent) {
			faults.record(ev.Kind, ev.Node, ev.Start, ev.End, ev.Err)
		})
	})
	for _, c := range clients {
		wg.Go(func() { c.loop(runCtx) })
	}
	if procs != nil {
		wg.Go(procs.wait)
	}
	wg.Go(func() { clientFaults(runCtx, cfg, arm) })
	if trig != nil {
		wg.Go(func() { killDuringAcquire(runCtx, cfg, b, plan, trig, faults) })
	}
	if cfg.Progress != nil {
		wg.Go(func() { progress(runCtx, cfg, stats) })
	}
	if cfg.StopOnViolation {
		wg.Go(func() { stopOnViolation(runCtx, cancel, mem, opts, 10*cfg.TTL) })
	}
	wg.Wait()
	if clients != nil && cfg.has(fault.ClientClockSkew) {
		// Client 0's clock ran at half speed from the start (startClients):
		// every hold of it measured its validity on that clock, not only
		// those it worked to the end of (skewNext), so the fault spans the run.
		clients[0].rec.FaultAt(fault.ClientClockSkew, start, time.Now(), nil)
	}
	if p, ok := b.(backend.Promotions); ok {
		p.OnPromotion(nil) // the run is over: what the history holds is what it had
	}
	heals.record()
	elapsed := time.Since(start)
	// The caller's ctx ended before the run's duration (SIGINT, SIGTERM):
	// the run is reported, marked as cut short. A stop on a violation
	// cancels only runCtx.
	interrupted := ctx.Err() != nil

	fctx, fcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer fcancel()
	for _, tg := range targets(cfg) {
		entries, err := st.Log(fctx, tg.resource)
		if err != nil {
			return report.Run{}, fmt.Errorf("chaos: reading the store: %w", err)
		}
		rec.Store(tg.resource, entries)
	}

	h := mem.History()
	var procReport []report.ClientProc
	if procs != nil {
		h, procReport = procs.merge(h), procs.report()
	}
	h.Clients = nil // numbered: see clientName
	run := report.Run{
		Nodes: cfg.Nodes, Clients: cfg.Clients, Duration: elapsed, Backend: cfg.Backend,
		Seed: int64(cfg.Seed), History: h, Result: checker.Check(h, opts), ClientProcs: procReport,
		Requested: slices.Clone(cfg.Faults), Interrupted: interrupted,
		Lock: cfg.Lock,
	}
	return run, faults.err()
}

// ErrInjection is wrapped by Run's error when faults could not be injected
// or undone.
var ErrInjection = errors.New("chaos: faults failed")

// faultLog records node faults in the history as they end, and keeps the
// errors of those that failed. A fault cut short by the end of the run (its
// ctx error, once the run is over) did not fail: it ended with the run.
type faultLog struct {
	rec    *recorder.Recorder
	runCtx context.Context // the workload's: ends with the run

	mu   sync.Mutex // protects errs
	errs []error
}

func (l *faultLog) record(kind fault.Kind, node int, start, end time.Time, err error) {
	if err != nil && l.runCtx.Err() != nil &&
		(errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		err = nil
	}
	l.rec.NodeFaultAt(kind, node, start, end, err)
	if err != nil {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.errs = append(l.errs, fmt.Errorf("%s on node %d at %v: %w",
			kind, node, l.rec.Offset(start).Round(time.Millisecond), err))
	}
}

// err returns the failures joined under ErrInjection, or nil.
func (l *faultLog) err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrInjection, errors.Join(l.errs...))
}

func newBackend(ctx context.Context, cfg Config) (backend.Backend, error) {
	switch cfg.Backend {
	case "docker":
		return newDocker(ctx, cfg)
	default:
		var opts []process.Option
		if lib := os.Getenv(FaketimeEnv); lib != "" {
			opts = append(opts, process.WithFaketime(lib))
		}
		if cfg.Replicas {
			opts = append(opts, process.WithReplicas(cfg.TTL))
		}
		b, err := process.New(ctx, cfg.Nodes, opts...)
		if err != nil {
			return nil, fmt.Errorf("chaos: starting %d redis-server nodes: %w", cfg.Nodes, err)
		}
		return b, nil
	}
}

// clientName names workload client i in the recorder: as a history with no
// names names index i, so that Run's history can number its clients
// instead (client i is index i) and lose nothing.
func clientName(i int) string { return history.History{}.ClientName(i) }

func startClients(cfg Config, addrs []string, rec *recorder.Recorder, st *store) ([]*client, error) {
	var (
		clients []*client
		seq     atomic.Uint64
	)
	longHeld := make(chan struct{}) // the rolling profile's long hold was taken
	for i := range cfg.Clients {
		var clk clock.Clock = clock.Real()
		if i == 0 && cfg.has(fault.ClientClockSkew) {
			clk = clock.NewSkewed(clock.Real(), 0, 0.5) // half speed: validity lasts twice as long
		}
		c, err := newClient(i, cfg, addrs, clk, rec.Client(clientName(i)), st, &seq)
		if err != nil {
			for _, c := range clients {
				c.close()
			}
			return nil, err
		}
		c.longHeld = longHeld
		clients = append(clients, c)
	}
	// Dial every client's node connections before the workload starts, as
	// a client process does before its hello (see serveClient): a cold pool
	// under load pays each dial and handshake inside the node timeout, and
	// each timeout closes the connection for a redial. Measured under -race
	// on a loaded machine with a 50ms node timeout: no hold at all in the
	// first 1.2-2s of a run, every client's calls timing out while dialling.
	var rdbs []*redis.Client
	for _, c := range clients {
		rdbs = append(rdbs, c.rdbs...)
	}
	warmUp(rdbs, max(time.Second, 20*cfg.NodeTimeout))
	return clients, nil
}

// Schedule returns the node fault schedule that Run follows for cfg, drawn
// from cfg.Seed: the same Config gives the same schedule. (Client faults and
// kill-during-acquire are timed by the workload, also from the seed.)
func Schedule(cfg Config) (schedule.Plan, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return schedule.Plan{}, err
	}
	return nodePlan(cfg)
}

// nodePlan draws the node fault schedule. kill-during-acquire keeps one
// node of the minority for itself.
func nodePlan(cfg Config) (schedule.Plan, error) {
	if cfg.rolling() {
		return schedule.NewRollingPlan(cfg.Nodes, cfg.Duration, cfg.rollingSpacing(), cfg.Seed)
	}
	if cfg.hunt() {
		opts := []schedule.PlanOption{schedule.WithMaxTTL(cfg.TTL)}
		if cfg.has(fault.Failover) {
			opts = append(opts, schedule.WithFailovers())
		}
		p, err := schedule.NewHuntPlan(cfg.Nodes, cfg.Duration, cfg.Seed, opts...)
		// Kinds left out of Faults are left out of the episodes.
		p.Steps = slices.DeleteFunc(p.Steps, func(s schedule.Step) bool { return !cfg.has(s.Kind) })
		return p, err
	}
	kinds := cfg.nodeKinds()
	maxDown := (cfg.Nodes - 1) / 2
	if cfg.has(fault.KillDuringAcquire) {
		maxDown--
	}
	if len(kinds) == 0 || maxDown < 1 {
		return schedule.Plan{Seed: cfg.Seed, Duration: cfg.Duration}, nil
	}
	return schedule.NewPlan(cfg.Nodes, cfg.Duration, kinds, cfg.Seed,
		schedule.WithMaxDown(maxDown), schedule.WithMaxTTL(cfg.TTL))
}

// clientFaults arms client pauses, clock-skew episodes and late writes at
// seeded times, through arm: the kinds in turn, in a seeded order, so that
// each requested kind is armed once the run has lasted one arming per kind
// (a kind drawn at random each time could be left out of a whole run).
// (The hunt's workload writes late by itself.)
func clientFaults(ctx context.Context, cfg Config, arm func(kind fault.Kind, client int)) {
	var kinds []fault.Kind
	for _, k := range fault.Kinds() {
		if k.ClientSide() && cfg.has(k) && !(cfg.hunt() && k == fault.LateWrite) {
			kinds = append(kinds, k)
		}
	}
	if len(kinds) == 0 {
		return
	}
	r := rand.New(rand.NewPCG(cfg.Seed, 0xc11e47))
	r.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	for n := 0; ; n++ {
		sleepReal(ctx, cfg.TTL+time.Duration(r.Int64N(int64(2*cfg.TTL))))
		if ctx.Err() != nil {
			return
		}
		switch k := kinds[n%len(kinds)]; k {
		case fault.ClientClockSkew:
			arm(k, 0) // client 0 has the slow clock
		default:
			arm(k, r.IntN(cfg.Clients))
		}
	}
}

// stopOnViolation checks the history as it grows and calls stop once a
// safety violation that no fault explains has stood for margin. A fault is
// recorded only when it ends, so a violation that looks unexplained may yet
// be blamed on a fault still in progress: margin must outlast the faults.
// Safety violations stay violations as the history grows, so the final
// check finds it again; so does an overtake (order): the grant is recorded,
// and the waiter it passed returns after it, if ever. Lost writes need the final store, and liveness
// (stalls, starvation, handovers) the whole run: those wait for the final
// check.
func stopOnViolation(ctx context.Context, stop context.CancelFunc, mem *recorder.Memory, opts checker.CheckOptions, margin time.Duration) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
		h := mem.History()
		for _, v := range checker.Check(h, opts).Violations {
			switch v.Property {
			case checker.LostWrites, checker.LivenessStall, checker.LivenessStarvation, checker.SlowHandover:
				continue
			}
			if !v.Expected && v.End < h.End-margin {
				stop()
				return
			}
		}
	}
}

func progress(ctx context.Context, cfg Config, stats func() recorder.Stats) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			fmt.Fprintf(cfg.Progress, "\r%s   ", report.Progress(stats(), 0))
		case <-ctx.Done():
			fmt.Fprintf(cfg.Progress, "\r%s   \n", report.Progress(stats(), 0))
			return
		}
	}
}
