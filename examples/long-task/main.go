// Command long-task runs a job that outlives its lock's TTL with Do: a
// watchdog extends the lock every TTL/3 while the job runs, and the moment
// the lock is lost — a quorum of nodes says it is gone, or its validity runs
// out while extensions keep failing (a failed extension is retried) — the
// job's ctx is cancelled, so it stops before it could write without a lock.
// To show that, it kills a majority of the (locally started) nodes in the
// middle of the job.
//
// With --nodes it does not kill servers it did not start: it runs the job for
// three TTLs on extensions alone and releases the lock.
//
//	go run ./examples/long-task [--nodes h1:6379,h2:6379,h3:6379]
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/internal/examplenodes"
	"github.com/fencedlock/fencedlock/redlock"
)

func main() { examplenodes.Main("long-task", run) }

func run(ctx context.Context, args []string, stdout io.Writer) error {
	nodes, err := examplenodes.FromArgs(ctx, "long-task", args, 3)
	if err != nil {
		return err
	}
	defer nodes.Close()
	const key = "long-task:nightly-report"

	// The lock's timings, sized from what this machine and network do now:
	// a per-node timeout of four times the slowest round trip seen over a
	// moment of PINGs (on a busy machine that includes its stalls), and not
	// under 100ms; a TTL of ten of those, so that the watchdog's extensions,
	// every TTL/3, have room to spare. (A real job picks its TTL from how
	// long a stall it can tolerate; this demo wants a short one, to show
	// several extensions in a few seconds.)
	rtt, err := slowestRoundTrip(ctx, nodes.Clients, 200*time.Millisecond)
	if err != nil {
		return err
	}
	nodeTimeout := max(4*rtt, 100*time.Millisecond)
	ttl := 10 * nodeTimeout
	fmt.Fprintf(stdout, "nodes: %s\nslowest round trip %v: node timeout=%v\n", nodes, rtt.Round(time.Microsecond), nodeTimeout.Round(time.Millisecond))
	fmt.Fprintf(stdout, "Do %q ttl=%v: the watchdog extends the lock every ~%v\n", key, ttl.Round(time.Millisecond), (ttl / 3).Round(time.Millisecond))

	// The observer shows what the lock itself sees: each extension, and each
	// node that fails a call. (It is meant for metrics; keep it quick.) It
	// runs on the lock's goroutines, so from here on everything is printed
	// through the timeline, which serialises the writes.
	tl := newTimeline(stdout)
	obs := &observer{tl: tl, extended: make(chan struct{}, 64)}
	locks, err := redlock.New(nodes.Clients, redlock.WithObserver(obs), redlock.WithNodeTimeout(nodeTimeout))
	if err != nil {
		return err
	}
	defer locks.Close()

	err = locks.Do(ctx, key, ttl, func(ctx context.Context, l *redlock.Lock) error {
		tl.printf("task started under token=%d, valid for %v", l.Token(), l.TTL().Round(time.Millisecond))
		// The job's work would go here, in steps, checking ctx between them
		// and passing l.Token() with every write. This one only waits.
		limit := time.NewTimer(20 * ttl) // bounded: the example must not hang
		defer limit.Stop()
		for n := 0; ; {
			select {
			case <-ctx.Done():
				select {
				case <-l.Done():
				default:
					return ctx.Err() // cancelled from outside (Ctrl-C), lock still held
				}
				// Do cancels ctx when l.Done() closes. With validity left,
				// a quorum of nodes said the hold is gone; else the
				// extensions kept failing until the validity ran out.
				why := fmt.Sprintf("a quorum of nodes said it is gone, with %v of validity left",
					l.TTL().Round(time.Millisecond))
				if l.TTL() <= 0 {
					why = fmt.Sprintf("its validity ran out while extensions failed (fewer than %d of %d nodes answered)",
						locks.Quorum(), locks.Nodes())
				}
				tl.printf("task ctx cancelled: %v; the lock was lost: %s", ctx.Err(), why)
				return ctx.Err()
			case <-obs.extended:
				n++
			case <-limit.C:
				return errors.New("the task ran 20 TTLs without the lock being lost")
			}
			switch {
			case n == 2 && nodes.Local():
				// A majority of the nodes dies mid-task: the lock cannot be
				// extended any more.
				for _, p := range nodes.Procs[:locks.Quorum()] {
					_ = p.Kill()
				}
				tl.printf("killed %d of %d nodes (%s)", locks.Quorum(), locks.Nodes(), strings.Join(nodes.Addrs[:locks.Quorum()], ", "))
			case n == 9 && !nodes.Local():
				tl.printf("task done after 3 TTLs on %d extensions", n)
				return nil
			}
		}
	})
	switch {
	case errors.Is(err, redlock.ErrLockLost) && nodes.Local():
		tl.printf("Do returned %q: errors.Is(err, redlock.ErrLockLost) = true", strings.ReplaceAll(err.Error(), "\n", "; "))
		return nil
	case err == nil && !nodes.Local():
		tl.printf("Do returned nil: task finished, lock released")
		return nil
	case err == nil:
		return errors.New("the task finished although a majority of nodes was killed")
	}
	return err
}

// slowestRoundTrip PINGs the nodes in turn for d and returns the slowest
// round trip.
func slowestRoundTrip(ctx context.Context, clients []redis.UniversalClient, d time.Duration) (time.Duration, error) {
	var slowest time.Duration
	for end := time.Now().Add(d); time.Now().Before(end); {
		for _, c := range clients {
			start := time.Now()
			if err := c.Ping(ctx).Err(); err != nil {
				return 0, err
			}
			slowest = max(slowest, time.Since(start))
		}
	}
	return slowest, nil
}

// observer prints lock events. Its methods run on the lock's goroutines.
type observer struct {
	redlock.NopObserver
	tl       *timeline
	extended chan struct{} // one per extension, for the task to count
}

func (o *observer) Extended(key string, token uint64) {
	o.tl.printf("extended by the watchdog (token=%d)", token)
	select {
	case o.extended <- struct{}{}:
	default:
	}
}

func (o *observer) NodeError(err *redlock.NodeError) {
	o.tl.printf("  node %d (%s) failed a call: %v", err.Node, err.Addr, err.Err)
}

// timeline prints lines stamped with the time since it began. It is safe for
// concurrent use.
type timeline struct {
	mu    sync.Mutex // protects w
	w     io.Writer
	start time.Time
}

func newTimeline(w io.Writer) *timeline { return &timeline{w: w, start: time.Now()} }

func (t *timeline) printf(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Fprintf(t.w, "t=+%-5s ", fmt.Sprintf("%dms", time.Since(t.start).Milliseconds()))
	fmt.Fprintf(t.w, format+"\n", args...)
}
