// Command lockbench measures fencedlock side by side with go-redsync/redsync,
// bsm/redislock (one node, for reference) and the raw protocol floor, in one
// run on the same Redis nodes, and prints the table and the ratios that the
// performance targets are stated in.
//
//	go run ./cmd/lockbench [--nodes a,b,c,d,e] [--duration 2s] [--json FILE] [--svg FILE]
//
// Without --nodes it starts 5 local redis-server processes on free loopback
// ports (redis-server must be on PATH) and stops them at the end; the paused
// scenario needs those, since it stops one with SIGSTOP, and so do the
// multiclient scenario's second phase, which kills one (and restarts it
// after), and the opt-in replicas scenario, which attaches a replica to
// each (see replicas.go). Exit status: 0 when
// the run completed (whether or not the targets were met), 1 when it failed,
// 2 on bad usage.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/bench/contender"
	"github.com/fencedlock/fencedlock/internal/redisproc"
)

const ownNodes = 5

type options struct {
	nodes            []string
	scenarios        []string
	libs             []string
	duration         time.Duration
	warmup           time.Duration
	ops              int64
	rounds           int
	goroutines       int
	waiters          int
	clients          int
	clientGoroutines int
	hold             time.Duration
	ttl              time.Duration
	nodeTimeout      time.Duration
	retryDelay       time.Duration
	holds            []int         // manyholds: the counts to measure
	holdsTTL         time.Duration // manyholds
	holdsFor         time.Duration // manyholds
	jsonPath         string
	svgPath          string
	cpuProfile       string
	memProfile       string
	quiet            bool
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("lockbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	nodes := fs.String("nodes", "", "comma-separated host:port of the Redis nodes (default: start 5 local redis-server processes)")
	scenarios := fs.String("scenarios", strings.Join(allScenarios(), ","),
		"scenarios to run (also, only when named: "+strings.Join(optInScenarios(), ",")+")")
	libs := fs.String("libs", strings.Join([]string{contender.Fencedlock, contender.Redsync, contender.Redislock, contender.Raw}, ","),
		"libraries to compare (also: "+contender.RedsyncFailFast+", which the paused scenario adds whenever redsync runs,\n"+
			"and "+contender.FencedlockAcks+", replicas scenario only, which it adds whenever fencedlock runs)")
	fs.DurationVar(&o.duration, "duration", 2*time.Second, "measured time per library per scenario (per phase in paused, multiclient and replicas)")
	fs.DurationVar(&o.warmup, "warmup", 200*time.Millisecond, "unmeasured warm-up per library per scenario (dials, script loads)")
	fs.IntVar(&o.rounds, "rounds", 2, "serial, parallel, onekey, multiclient and replicas (each phase): split --duration into this many rounds, the libraries taking turns")
	fs.Int64Var(&o.ops, "ops", 0, "stop a measurement after this many operations, if before --duration (0: no limit)")
	fs.IntVar(&o.goroutines, "goroutines", 64, "parallel scenario and replicas-parallel: goroutines, each on its own key")
	fs.IntVar(&o.waiters, "waiters", 16, "onekey scenario: goroutines contending for one key")
	fs.IntVar(&o.clients, "clients", 8, "multiclient scenario: separate instances of each library (own go-redis clients, as separate processes)")
	fs.IntVar(&o.clientGoroutines, "client-goroutines", 2, "multiclient scenario: goroutines per instance, all on one key")
	fs.DurationVar(&o.hold, "hold", time.Millisecond, "onekey and multiclient scenarios: how long each acquisition holds the lock")
	fs.DurationVar(&o.ttl, "ttl", 10*time.Second, "lock TTL for every library")
	fs.DurationVar(&o.nodeTimeout, "node-timeout", 50*time.Millisecond,
		"paused and multiclient scenarios: per-node timeout for fencedlock (WithNodeTimeout) and redsync (WithTimeoutFactor(node-timeout/ttl)),\n"+
			"and the deadline on redsync's Unlock and each raw call (elsewhere each library keeps its default, ttl/20)")
	fs.DurationVar(&o.retryDelay, "redislock-retry", 10*time.Millisecond, "redislock's LinearBackoff in the onekey scenario")
	holds := fs.String("holds", "50000", "manyholds scenario: comma-separated counts of auto-extended holds, measured in turn")
	fs.DurationVar(&o.holdsTTL, "holds-ttl", 5*time.Second, "manyholds scenario: the TTL of every hold")
	fs.DurationVar(&o.holdsFor, "holds-for", 10*time.Second, "manyholds scenario: how long the holds are kept once all are taken")
	fs.StringVar(&o.jsonPath, "json", "", "write the results as JSON to this file")
	fs.StringVar(&o.svgPath, "svg", "", "write the onekey wait distributions as an SVG chart to this file")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file (narrow it with --scenarios and --libs)")
	fs.StringVar(&o.memProfile, "memprofile", "", "write an allocation profile of the whole run to this file (every allocation sampled)")
	fs.BoolVar(&o.quiet, "q", false, "no progress lines on stderr")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	o.nodes = splitList(*nodes)
	o.scenarios = splitList(*scenarios)
	o.libs = splitList(*libs)
	known := append(allScenarios(), optInScenarios()...)
	for _, s := range o.scenarios {
		if !slices.Contains(known, s) {
			return o, fmt.Errorf("unknown scenario %q (known: %s)", s, strings.Join(known, ","))
		}
	}
	for _, f := range splitList(*holds) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return o, fmt.Errorf("--holds: %q is not a count ≥ 1", f)
		}
		o.holds = append(o.holds, n)
	}
	for _, l := range o.libs {
		if !slices.Contains(contender.Names(), l) {
			return o, fmt.Errorf("unknown library %q (known: %s)", l, strings.Join(contender.Names(), ","))
		}
	}
	switch {
	case o.duration <= 0, o.warmup < 0, o.ops < 0:
		return o, errors.New("--duration must be > 0, --warmup and --ops ≥ 0")
	case o.goroutines < 1 || o.waiters < 1 || o.rounds < 1 || o.clients < 1 || o.clientGoroutines < 1:
		return o, errors.New("--goroutines, --waiters, --clients, --client-goroutines and --rounds must be ≥ 1")
	case o.hold < 0 || o.ttl <= 0 || o.nodeTimeout <= 0 || o.retryDelay <= 0:
		return o, errors.New("--ttl, --node-timeout and --redislock-retry must be > 0, --hold ≥ 0")
	case o.nodeTimeout >= o.ttl:
		return o, errors.New("--node-timeout must be below --ttl")
	case o.holdsTTL <= 0 || o.holdsFor <= 0:
		return o, errors.New("--holds-ttl and --holds-for must be > 0")
	}
	return o, nil
}

func splitList(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// run is main without the process: it returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "lockbench:", err)
		return 2
	}
	stopProfiles, err := startProfiles(o)
	if err != nil {
		fmt.Fprintln(stderr, "lockbench:", err)
		return 1
	}
	rep, err := bench(ctx, o, stderr)
	err = errors.Join(err, stopProfiles())
	if rep != nil {
		rep.printTable(stdout)
	}
	if err == nil && o.jsonPath != "" {
		err = rep.writeJSON(o.jsonPath)
	}
	if err == nil && o.svgPath != "" {
		err = rep.writeSVG(o.svgPath)
	}
	if err != nil {
		fmt.Fprintln(stderr, "lockbench:", err)
		return 1
	}
	return 0
}

// bench starts (or dials) the nodes and runs the selected scenarios.
func bench(ctx context.Context, o options, stderr io.Writer) (_ *Report, err error) {
	e := &env{opts: o, addrs: o.nodes, log: func(format string, args ...any) {
		if !o.quiet {
			fmt.Fprintf(stderr, format+"\n", args...)
		}
	}}
	rl := new(redisLog)
	redis.SetLogger(rl)
	defer func() {
		if n, first := rl.summary(); n > 0 {
			e.log("go-redis logged %d lines, the first: %s", n, strings.TrimSpace(first))
		}
	}()
	if len(e.addrs) == 0 {
		procs, err := redisproc.StartN(ctx, ownNodes, redisproc.Config{})
		if err != nil {
			return nil, err
		}
		defer func() {
			for _, p := range procs {
				err = errors.Join(err, p.Close())
			}
		}()
		e.procs = procs
		for _, p := range procs {
			e.addrs = append(e.addrs, p.Addr())
		}
	}
	for _, a := range e.addrs {
		if err := redisproc.Ping(ctx, a, time.Second); err != nil {
			return nil, fmt.Errorf("node %s: %w", a, err)
		}
	}
	rep := &Report{
		Machine: machine(ctx, e.addrs, e.procs != nil),
		Settings: Settings{
			Scenarios: o.scenarios, Libraries: o.libs,
			Duration: o.duration.String(), Warmup: o.warmup.String(), Ops: o.ops, Rounds: o.rounds,
			Goroutines: o.goroutines, Waiters: o.waiters, Clients: o.clients, ClientGoroutines: o.clientGoroutines,
			Hold: o.hold.String(),
			TTL:  o.ttl.String(), NodeTimeout: o.nodeTimeout.String(), RetryDelay: o.retryDelay.String(),
			RedsyncTries: contender.Config{}.Defaults().RedsyncTries, RedsyncFactor: float64(o.nodeTimeout) / float64(o.ttl),
		},
	}
	e.log("lockbench: %d nodes %v, %s per library per scenario", len(e.addrs), e.addrs, o.duration)
	for _, sc := range append(allScenarios(), optInScenarios()...) { // fixed order, whatever the flag's
		if !slices.Contains(o.scenarios, sc) {
			continue
		}
		if sc == scManyHolds {
			mh, err := e.runManyHolds(ctx)
			rep.ManyHolds = append(rep.ManyHolds, mh...)
			if err != nil {
				return rep, err
			}
			continue
		}
		rs, err := e.runScenario(ctx, sc)
		rep.Results = append(rep.Results, rs...)
		if err != nil {
			return rep, err
		}
	}
	rep.computeRatios()
	return rep, nil
}

// redisLog takes go-redis's own log lines off stderr — with a node killed,
// every client logs each failed dial to it — and keeps a count and the first,
// for one line at the end. What the libraries return is in the table.
type redisLog struct {
	mu    sync.Mutex // protects n, first
	n     int
	first string
}

func (l *redisLog) Printf(_ context.Context, format string, v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n++; l.n == 1 {
		l.first = fmt.Sprintf(format, v...)
	}
}

func (l *redisLog) summary() (int, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n, l.first
}

// machine describes the host and the Redis nodes.
func machine(ctx context.Context, addrs []string, own bool) Machine {
	m := Machine{
		CPU: cpuModel(), Cores: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0),
		Go: runtime.Version(), OSArch: runtime.GOOS + "/" + runtime.GOARCH,
		Nodes: len(addrs), OwnNodes: own, Redis: "redis (version unknown)",
	}
	c := redis.NewClient(&redis.Options{Addr: addrs[0]})
	defer c.Close()
	if info, err := c.Info(ctx, "server").Result(); err == nil {
		for line := range strings.SplitSeq(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
				m.Redis = "redis " + v
			}
		}
	}
	return m
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

// startProfiles starts the profiles asked for; the returned func writes them.
func startProfiles(o options) (func() error, error) {
	var cpu *os.File
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return nil, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, err
		}
		cpu = f
	}
	if o.memProfile != "" {
		runtime.MemProfileRate = 1
	}
	return func() error {
		var errs []error
		if cpu != nil {
			pprof.StopCPUProfile()
			errs = append(errs, cpu.Close())
		}
		if o.memProfile != "" {
			f, err := os.Create(o.memProfile)
			if err != nil {
				return errors.Join(append(errs, err)...)
			}
			errs = append(errs, pprof.Lookup("allocs").WriteTo(f, 0), f.Close())
		}
		return errors.Join(errs...)
	}, nil
}
