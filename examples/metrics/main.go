// Command metrics runs a contended lock workload and serves its Prometheus
// metrics on /metrics. Workers in two Clients (as if two processes) take
// turns on one key: each takes the lock (Lock with a bounded wait, or
// TryLock), writes through a fencing guard, extends the hold once, and
// unlocks; then it writes once more with its previous, older token, which
// the guard must refuse. Every event is counted by redlockprom.
//
//	go run ./examples/metrics [--nodes h1:6379,h2:6379,h3:6379] [--listen 127.0.0.1:9464]
//	curl -s http://127.0.0.1:9464/metrics | grep ^fencedlock_
//
// It serves until Ctrl-C (or until the workload ends, with --exit).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/fencing"
	"github.com/fencedlock/fencedlock/internal/examplenodes"
	"github.com/fencedlock/fencedlock/redlock"
	"github.com/fencedlock/fencedlock/redlock/redlockprom"
)

func main() { examplenodes.Main("metrics", run) }

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("metrics", flag.ContinueOnError)
	addrs := examplenodes.Flag(fs, 3)
	listen := fs.String("listen", "127.0.0.1:9464", "address to serve /metrics on")
	workers := fs.Int("workers", 8, "workers contending for the key")
	rounds := fs.Int("rounds", 50, "lock calls per worker")
	exit := fs.Bool("exit", false, "exit when the workload ends instead of serving until Ctrl-C")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *workers < 1 || *rounds < 1 {
		return fmt.Errorf("--workers %d and --rounds %d must be at least 1", *workers, *rounds)
	}
	nodes, err := examplenodes.Open(ctx, *addrs, 3)
	if err != nil {
		return err
	}
	defer nodes.Close()

	reg := prometheus.NewRegistry()
	m, err := redlockprom.New(reg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: handler(reg), ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() { _ = srv.Close(); <-served }()
	fmt.Fprintf(stdout, "nodes: %s\nmetrics: http://%s/metrics\n", nodes, ln.Addr())

	w := Workload{Workers: *workers, Rounds: *rounds, Key: "metrics:job", TTL: time.Second, Hold: 2 * time.Millisecond}
	tally, err := w.Run(ctx, nodes.Clients, m)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d lock calls: %d acquired, %d refused or timed out; %d stale writes refused\n",
		tally.Calls, tally.Acquired, tally.Calls-tally.Acquired, tally.StaleRejected)
	if *exit {
		return nil
	}
	fmt.Fprintln(stdout, "serving until Ctrl-C")
	<-ctx.Done()
	return nil
}

// handler serves reg's metrics on /metrics.
func handler(reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return mux
}

// Workload is the contended run: Workers goroutines, split between two
// Clients, each making Rounds lock calls on Key.
type Workload struct {
	Workers, Rounds int
	Key             string
	TTL             time.Duration // of each hold
	Hold            time.Duration // how long a holder works before it extends and unlocks
}

// Tally is what the workload did, counted by the workload itself.
type Tally struct {
	Calls         int // TryLock and Lock calls
	Acquired      int // of them, those that returned a hold
	Deadline      int // Lock calls that failed as their wait ran out (ctx deadline)
	NodeErrors    int // TryLock calls refused with node errors among the answers (a node timed out)
	Extended      int // successful Extends
	Released      int // Unlocks that returned nil
	Admitted      int // guarded writes admitted
	StaleRejected int // late writes with an older token, refused as stale
	LateWrites    int // late writes attempted: every one must be refused
}

func (t *Tally) add(o Tally) {
	t.Calls += o.Calls
	t.Acquired += o.Acquired
	t.Deadline += o.Deadline
	t.NodeErrors += o.NodeErrors
	t.Extended += o.Extended
	t.Released += o.Released
	t.Admitted += o.Admitted
	t.StaleRejected += o.StaleRejected
	t.LateWrites += o.LateWrites
}

// Run runs the workload on nodes, with m observing the Clients and the
// guard; it returns once every worker made its calls.
func (w Workload) Run(ctx context.Context, nodes []redis.UniversalClient, m *redlockprom.Metrics) (Tally, error) {
	var clients [2]*redlock.Client
	for i := range clients {
		c, err := redlock.New(nodes, redlock.WithObserver(m))
		if err != nil {
			return Tally{}, err
		}
		defer c.Close()
		clients[i] = c
	}
	// The guarded storage: a fencing guard on the first node.
	guard := fencing.NewRedis(nodes[0], fencing.WithObserver(m))
	resource := "metrics-" + uuid.NewString()[:8] // fresh per run

	var (
		mu    sync.Mutex // protects total, first
		total Tally
		first error
		wg    sync.WaitGroup
	)
	for i := range w.Workers {
		wg.Go(func() {
			t, err := w.worker(ctx, clients[i%2], guard, resource, i)
			mu.Lock()
			defer mu.Unlock()
			total.add(t)
			if first == nil {
				first = err
			}
		})
	}
	wg.Wait()
	return total, first
}

// worker makes its Rounds calls: every fourth a TryLock, the others a Lock
// that waits at most as long as all workers' holds take.
func (w Workload) worker(ctx context.Context, c *redlock.Client, g *fencing.Redis, resource string, id int) (Tally, error) {
	var t Tally
	var prev uint64 // the token of this worker's previous hold
	wait := time.Duration(w.Workers) * w.Hold
	dataKey := "metrics:data:{" + resource + "}"
	for round := range w.Rounds {
		t.Calls++
		var l *redlock.Lock
		var err error
		waited := false // the Lock's wait ran out
		if round%4 == 3 {
			l, err = c.TryLock(ctx, w.Key, w.TTL)
		} else {
			lctx, cancel := context.WithTimeout(ctx, wait)
			l, err = c.Lock(lctx, w.Key, w.TTL)
			waited = lctx.Err() != nil
			cancel()
		}
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return t, ctx.Err()
		case waited:
			t.Deadline++
			continue
		case errors.Is(err, redlock.ErrNotAcquired):
			if ne := (*redlock.NodeError)(nil); errors.As(err, &ne) {
				t.NodeErrors++ // a busy machine's node timeout
			}
			continue
		default:
			return t, err
		}
		t.Acquired++
		if err := g.Set(ctx, resource, l.Token(), dataKey, fmt.Sprintf("worker %d round %d", id, round)); err != nil {
			return t, fmt.Errorf("write with the lock held: %w", err)
		}
		t.Admitted++
		time.Sleep(w.Hold) // the work
		if err := l.Extend(ctx, w.TTL); err == nil {
			t.Extended++
		}
		if err := l.Unlock(ctx); err == nil {
			t.Released++
		}
		// A former holder's late write: its token is older than this
		// hold's, already admitted, so the guard must refuse it.
		if prev > 0 {
			t.LateWrites++
			err := g.Set(ctx, resource, prev, dataKey, "late")
			switch {
			case errors.Is(err, fencing.ErrStaleToken):
				t.StaleRejected++
			case err != nil:
				return t, err
			default:
				return t, fmt.Errorf("a late write with token %d got in after token %d", prev, l.Token())
			}
		}
		prev = l.Token()
	}
	return t, nil
}
