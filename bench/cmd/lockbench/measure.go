package main

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fencedlock/fencedlock/bench/contender"
)

// A phase runs one loop per worker until its deadline (or the op budget, or
// ctx) and measures it as a whole: wall time, latencies and the process's
// allocations. Workers are goroutines each with its own Session and hist.

type worker struct {
	s      contender.Session
	h      hist
	ops    int64
	errs   int64
	stuck  int64         // waits cut off by the end of the phase (Lock only)
	longst time.Duration // longest such wait
	first  error         // the first error of the phase
}

func (w *worker) fail(err error) {
	w.errs++
	if w.first == nil {
		w.first = err
	}
}

// limit stops workers at a deadline or after a shared number of operations.
type limit struct {
	ctx      context.Context
	deadline time.Time
	budget   int64 // 0: none
	used     atomic.Int64
}

// more reports whether a worker may start another operation.
func (l *limit) more() bool {
	if l.ctx.Err() != nil || !time.Now().Before(l.deadline) {
		return false
	}
	return l.budget == 0 || l.used.Add(1) <= l.budget
}

type loop func(ctx context.Context, w *worker, lim *limit)

type phaseResult struct {
	elapsed time.Duration
	ops     int64
	errs    int64
	stuck   int64
	longest time.Duration
	h       hist
	allocs  uint64
	bytes   uint64
	perG    []int64 // ops per worker
	first   error   // one worker's first error
	sent    contender.Counts
}

// runPhase runs body on every worker: first for warmup (discarded: it dials
// connections and loads scripts), then measured for d. counts reports what
// the library (all its instances) sent so far.
func runPhase(ctx context.Context, counts func() contender.Counts, workers []*worker, warmup, d time.Duration, budget int64, body loop) phaseResult {
	if warmup > 0 {
		runWorkers(ctx, workers, &limit{ctx: ctx, deadline: time.Now().Add(warmup)}, body)
	}
	for _, w := range workers {
		w.h.reset()
		w.ops, w.errs, w.stuck, w.longst, w.first = 0, 0, 0, 0, nil
	}
	runtime.GC()
	sent := counts()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	runWorkers(ctx, workers, &limit{ctx: ctx, deadline: start.Add(d), budget: budget}, body)
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	sent = counts().Sub(sent)

	r := phaseResult{
		elapsed: elapsed,
		allocs:  after.Mallocs - before.Mallocs,
		bytes:   after.TotalAlloc - before.TotalAlloc,
		perG:    make([]int64, len(workers)),
		sent:    sent,
	}
	for i, w := range workers {
		r.h.merge(&w.h)
		r.ops += w.ops
		r.errs += w.errs
		r.stuck += w.stuck
		r.longest = max(r.longest, w.longst)
		r.perG[i] = w.ops
		if r.first == nil {
			r.first = w.first
		}
	}
	return r
}

func runWorkers(ctx context.Context, workers []*worker, lim *limit, body loop) {
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Go(func() { body(ctx, w, lim) })
	}
	wg.Wait()
}

// acquireRelease is the uncontended loop: TryLock then Unlock, timed together.
func acquireRelease(ctx context.Context, w *worker, lim *limit) {
	for lim.more() {
		t0 := time.Now()
		if err := w.s.TryLock(ctx); err != nil {
			w.fail(err)
			continue
		}
		if err := w.s.Unlock(ctx); err != nil {
			w.fail(err)
		}
		w.h.record(time.Since(t0))
		w.ops++
	}
}

// contended returns the one-key loop: a blocking Lock (timed from the call to
// the acquisition), hold for hold, Unlock. A Lock still waiting at the end
// of the phase gives up through its ctx; its wait is kept apart (stuck).
func contended(hold time.Duration) loop {
	return func(ctx context.Context, w *worker, lim *limit) {
		wctx, cancel := context.WithDeadline(ctx, lim.deadline)
		defer cancel()
		uctx := context.WithoutCancel(ctx) // releases go out even after the deadline
		for lim.more() {
			t0 := time.Now()
			err := w.s.Lock(wctx)
			wait := time.Since(t0)
			if err != nil {
				if wctx.Err() != nil {
					w.stuck++
					w.longst = max(w.longst, wait)
					return
				}
				w.fail(err)
				continue
			}
			w.h.record(wait)
			w.ops++
			time.Sleep(hold) // the critical section itself, not synchronisation
			if err := w.s.Unlock(uctx); err != nil {
				w.fail(err)
			}
		}
	}
}

// add folds another round of the same workers into r.
func (r *phaseResult) add(o phaseResult) {
	r.elapsed += o.elapsed
	r.ops += o.ops
	r.errs += o.errs
	r.stuck += o.stuck
	r.longest = max(r.longest, o.longest)
	r.h.merge(&o.h)
	r.allocs += o.allocs
	r.bytes += o.bytes
	if r.perG == nil {
		r.perG = make([]int64, len(o.perG))
	}
	for i, n := range o.perG {
		r.perG[i] += n
	}
	if r.first == nil {
		r.first = o.first
	}
	if r.sent.Commands == nil {
		r.sent.Commands = map[string]int64{}
	}
	r.sent.Trips += o.sent.Trips
	r.sent.ReplicaAcks += o.sent.ReplicaAcks
	for k, v := range o.sent.Commands {
		r.sent.Commands[k] += v
	}
}
