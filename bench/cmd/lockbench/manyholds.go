package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/redlock"
)

// The manyholds scenario (opt-in: --scenarios manyholds): one fencedlock
// Client, every option default, takes each count of --holds keys with
// AutoExtend at --holds-ttl and keeps them for --holds-for, as a service
// holding many leases would. It reports how many holds were lost (Done
// closed before Unlock), what the holds cost in goroutines and in heap per
// hold (runtime.ReadMemStats after a GC, every hold alive), and how the
// watchdog kept up: extensions and node errors per second. fencedlock only:
// the others have no auto-extension to compare.

const scManyHolds = "manyholds"

// ManyHolds is one count of the manyholds scenario.
type ManyHolds struct {
	Holds           int     `json:"holds"`
	Acquired        int     `json:"acquired"`
	Lost            int64   `json:"lost"`
	LostPct         float64 `json:"lost_pct"`
	TTL             string  `json:"ttl"`
	HeldFor         string  `json:"held_for"`
	AcquireSeconds  float64 `json:"acquire_s"`
	GoroutinesDelta int     `json:"goroutines_delta"` // all holds taken, against the Client before them
	GoroutinesMax   int     `json:"goroutines_max_delta"`
	HeapPerHold     float64 `json:"heap_bytes_per_hold"`
	ExtendsPerSec   float64 `json:"extends_per_s"`
	NodeErrsPerSec  float64 `json:"node_errors_per_s"`
}

// holdCounter is the Observer that counts what the scenario reports.
type holdCounter struct {
	redlock.NopObserver
	extended, lost, nodeErrs atomic.Int64
}

func (h *holdCounter) Extended(string, uint64)      { h.extended.Add(1) }
func (h *holdCounter) Lost(string, uint64)          { h.lost.Add(1) }
func (h *holdCounter) NodeError(*redlock.NodeError) { h.nodeErrs.Add(1) }
func (e *env) manyHoldsClients() []redis.UniversalClient {
	nodes := make([]redis.UniversalClient, len(e.addrs))
	for i, a := range e.addrs {
		// The options every library gets here (see contender.newClients).
		nodes[i] = redis.NewClient(&redis.Options{Addr: a, ContextTimeoutEnabled: true})
	}
	return nodes
}

// runManyHolds measures each count of --holds in turn.
func (e *env) runManyHolds(ctx context.Context) ([]*ManyHolds, error) {
	var out []*ManyHolds
	for _, n := range e.opts.holds {
		r, err := e.manyHolds(ctx, n)
		if r != nil {
			out = append(out, r)
			e.log("%-11s %6d holds: %d lost (%.3f%%), %+d goroutines (max %+d), %.0f B/hold, %.0f extends/s, %.0f node errors/s",
				scManyHolds, r.Holds, r.Lost, r.LostPct, r.GoroutinesDelta, r.GoroutinesMax, r.HeapPerHold, r.ExtendsPerSec, r.NodeErrsPerSec)
		}
		if err != nil {
			return out, fmt.Errorf("%s %d: %w", scManyHolds, n, err)
		}
	}
	return out, nil
}

// manyHoldsWorkers take the holds in parallel: enough to keep the Client's
// pipelines full, as many callers would.
const manyHoldsWorkers = 64

func (e *env) manyHolds(ctx context.Context, n int) (_ *ManyHolds, err error) {
	nodes := e.manyHoldsClients()
	defer func() {
		for _, c := range nodes {
			err = errors.Join(err, c.Close())
		}
	}()
	obs := &holdCounter{}
	c, err := redlock.New(nodes, redlock.WithObserver(obs))
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, c.Close()) }()
	ttl := e.opts.holdsTTL
	prefix := fmt.Sprintf("lockbench:manyholds:%d:", time.Now().UnixNano())
	// Warm up: connections dialled, scripts loaded, the scheduler running.
	warm, err := c.TryLock(ctx, prefix+"warm-up", ttl, redlock.AutoExtend())
	if err != nil {
		return nil, err
	}
	defer func() { _ = warm.Unlock(context.WithoutCancel(ctx)) }()

	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	g0 := runtime.NumGoroutine()

	locks := make([]*redlock.Lock, n)
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr error
	var errOnce sync.Once
	for range manyHoldsWorkers {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n && ctx.Err() == nil; i = int(next.Add(1)) - 1 {
				l, err := c.TryLock(ctx, fmt.Sprintf("%s%d", prefix, i), ttl, redlock.AutoExtend())
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					continue
				}
				locks[i] = l
				_ = l.Done() // watched, as a holder would
			}
		})
	}
	wg.Wait()
	r := &ManyHolds{Holds: n, TTL: ttl.String(), HeldFor: e.opts.holdsFor.String(), AcquireSeconds: time.Since(start).Seconds()}
	for _, l := range locks {
		if l != nil {
			r.Acquired++
		}
	}
	if firstErr != nil {
		e.log("%s %d: %d not acquired, the first: %v", scManyHolds, n, n-r.Acquired, firstErr)
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	r.GoroutinesDelta = runtime.NumGoroutine() - g0
	if r.Acquired > 0 {
		r.HeapPerHold = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(r.Acquired)
	}

	// Hold, sampling the goroutines; the holds lost are those whose Done
	// closed before Unlock.
	ext0, errs0 := obs.extended.Load(), obs.nodeErrs.Load()
	held := time.Now()
	tick := time.NewTicker(100 * time.Millisecond) // a sample rate, not a synchronisation
	defer tick.Stop()
	end := time.NewTimer(e.opts.holdsFor)
	defer end.Stop()
	r.GoroutinesMax = r.GoroutinesDelta
hold:
	for {
		select {
		case <-tick.C:
			r.GoroutinesMax = max(r.GoroutinesMax, runtime.NumGoroutine()-g0)
		case <-end.C:
			break hold
		case <-ctx.Done():
			return r, ctx.Err()
		}
	}
	secs := time.Since(held).Seconds()
	r.ExtendsPerSec = float64(obs.extended.Load()-ext0) / secs
	r.NodeErrsPerSec = float64(obs.nodeErrs.Load()-errs0) / secs
	for _, l := range locks {
		if l == nil {
			continue
		}
		select {
		case <-l.Done():
			r.Lost++
		default:
		}
	}
	if r.Acquired > 0 {
		r.LostPct = 100 * float64(r.Lost) / float64(r.Acquired)
	}
	// Let them go, in parallel as they were taken.
	next.Store(0)
	for range manyHoldsWorkers {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				if locks[i] != nil {
					_ = locks[i].Unlock(context.WithoutCancel(ctx))
				}
			}
		})
	}
	wg.Wait()
	return r, nil
}

// printManyHolds prints the manyholds rows, if any.
func (rep *Report) printManyHolds(w io.Writer) {
	if len(rep.ManyHolds) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "manyholds\tttl\theld\tlost\tlost %\tgoroutines Δ\tmax Δ\tB/hold\textends/s\tnode errors/s\tacquire s\t")
	for _, r := range rep.ManyHolds {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%.3f\t%+d\t%+d\t%.0f\t%.0f\t%.0f\t%.1f\t\n", r.Holds, r.TTL, r.HeldFor, r.Lost, r.LostPct,
			r.GoroutinesDelta, r.GoroutinesMax, r.HeapPerHold, r.ExtendsPerSec, r.NodeErrsPerSec, r.AcquireSeconds)
	}
	tw.Flush()
}
