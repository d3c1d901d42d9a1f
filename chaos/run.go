package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/fencedlock/fencedlock/chaos/backend"
	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/history"
	"github.com/fencedlock/fencedlock/chaos/report"
	"github.com/fencedlock/fencedlock/clock"
	"github.com/fencedlock/fencedlock/fencing"
	"github.com/fencedlock/fencedlock/internal/redisproc"
)

// Run starts the nodes, runs the workload for cfg.Duration while the
// seeded fault schedule runs, checks the history and returns the run, ready
// for the report writers. The nodes and the store are gone when it returns.
// An error means the run itself could not be carried out (no redis-server,
// no Docker); violations are in the result, not in the error.
func Run(ctx context.Context, cfg Config) (report.Run, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
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
	store := fencing.NewRedis(storeRDB)

	rec := history.NewRecorder(clock.Real(), cfg.Nodes)
	clients, err := startClients(cfg, backend.Addrs(b), rec, store)
	if err != nil {
		return report.Run{}, err
	}
	defer func() {
		for _, c := range clients {
			c.close()
		}
	}()

	plan, err := nodePlan(cfg)
	if err != nil {
		return report.Run{}, err
	}

	runCtx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	start := time.Now()
	var g errgroup.Group
	var faultErrs error
	var mu sync.Mutex // protects faultErrs
	g.Go(func() error {
		err := backend.Run(runCtx, b, plan, func(ev backend.FaultEvent) {
			rec.FaultAt(ev.Kind, ev.Node, ev.Start, ev.End)
		})
		mu.Lock()
		faultErrs = errors.Join(faultErrs, ignoreEnd(err))
		mu.Unlock()
		return nil
	})
	for _, c := range clients {
		g.Go(func() error { c.loop(runCtx); return nil })
	}
	g.Go(func() error { clientFaults(runCtx, cfg, clients); return nil })
	if cfg.has(fault.KillDuringAcquire) {
		g.Go(func() error {
			err := killDuringAcquire(runCtx, cfg, b, plan, clients[0], rec)
			mu.Lock()
			faultErrs = errors.Join(faultErrs, ignoreEnd(err))
			mu.Unlock()
			return nil
		})
	}
	if cfg.Progress != nil {
		g.Go(func() error { progress(runCtx, cfg, rec); return nil })
	}
	_ = g.Wait()
	elapsed := time.Since(start)

	fctx, fcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer fcancel()
	log, err := store.Log(fctx, resource)
	if err != nil {
		return report.Run{}, fmt.Errorf("chaos: reading the store: %w", err)
	}
	entries := make([]string, len(log))
	for i, e := range log {
		entries[i] = e.Data
	}
	rec.FinalStore(resource, entries)

	h := rec.History()
	res := history.Check(h, history.CheckOptions{})
	run := report.Run{
		Nodes: cfg.Nodes, Clients: cfg.Clients, Duration: elapsed, Backend: cfg.Backend,
		Seed: int64(cfg.Seed), History: h, Result: res,
	}
	if faultErrs != nil && cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "\nchaos: some faults failed to apply: %v\n", faultErrs)
	}
	return run, nil
}

func ignoreEnd(err error) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		// Run reports the end of the run among its errors; keep the others.
		var rest []error
		if u, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range u.Unwrap() {
				if !errors.Is(e, context.DeadlineExceeded) && !errors.Is(e, context.Canceled) {
					rest = append(rest, e)
				}
			}
		}
		return errors.Join(rest...)
	}
	return err
}

func newBackend(ctx context.Context, cfg Config) (backend.Backend, error) {
	switch cfg.Backend {
	case "docker":
		return newDocker(ctx, cfg)
	default:
		b, err := backend.NewProcess(ctx, cfg.Nodes)
		if err != nil {
			return nil, fmt.Errorf("chaos: starting %d redis-server nodes: %w", cfg.Nodes, err)
		}
		return b, nil
	}
}

func startClients(cfg Config, addrs []string, rec *history.Recorder, store *fencing.Redis) ([]*client, error) {
	var clients []*client
	for i := range cfg.Clients {
		var clk clock.Clock = clock.Real()
		if i == 0 && cfg.has(fault.ClientClockSkew) {
			clk = clock.NewSkewed(clock.Real(), 0, 0.5) // half speed: validity lasts twice as long
		}
		c, err := newClient(i, cfg, addrs, clk, rec, store)
		if err != nil {
			for _, c := range clients {
				c.close()
			}
			return nil, err
		}
		clients = append(clients, c)
	}
	return clients, nil
}

// nodePlan draws the node fault schedule. kill-during-acquire keeps one
// node of the minority for itself.
func nodePlan(cfg Config) (backend.Plan, error) {
	kinds := cfg.nodeKinds()
	maxDown := (cfg.Nodes - 1) / 2
	if cfg.has(fault.KillDuringAcquire) {
		maxDown--
	}
	if len(kinds) == 0 || maxDown < 1 {
		return backend.Plan{Seed: cfg.Seed, Duration: cfg.Duration}, nil
	}
	return backend.NewPlan(cfg.Nodes, cfg.Duration, kinds, cfg.Seed,
		backend.WithMaxDown(maxDown), backend.WithMaxTTL(cfg.TTL))
}

// clientFaults arms client pauses and clock-skew episodes at seeded times.
func clientFaults(ctx context.Context, cfg Config, clients []*client) {
	pause, skew := cfg.has(fault.ClientPause), cfg.has(fault.ClientClockSkew)
	if !pause && !skew {
		return
	}
	r := rand.New(rand.NewPCG(cfg.Seed, 0xc11e47))
	for {
		sleepReal(ctx, cfg.TTL+time.Duration(r.Int64N(int64(2*cfg.TTL))))
		if ctx.Err() != nil {
			return
		}
		switch {
		case pause && (!skew || r.IntN(2) == 0):
			clients[r.IntN(len(clients))].pauseNext.Store(true)
		default:
			clients[0].skewNext.Store(true) // client 0 has the slow clock
		}
	}
}

func progress(ctx context.Context, cfg Config, rec *history.Recorder) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			fmt.Fprintf(cfg.Progress, "\r%s   ", report.Progress(rec.Stats(), 0))
		case <-ctx.Done():
			fmt.Fprintf(cfg.Progress, "\r%s   \n", report.Progress(rec.Stats(), 0))
			return
		}
	}
}
