package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/fencedlock/fencedlock/chaos"
	"github.com/fencedlock/fencedlock/chaos/checker"
	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/history"
	"github.com/fencedlock/fencedlock/chaos/report"
)

var chaosHeader = `Usage:
  fencedlock chaos [--nodes 5] [--clients 8] [--duration 20s] [--faults LIST]
                   [--seed N] [--backend process|docker] [--ttl D] [--node-timeout D]
                   [--json FILE] [--html FILE] [--history FILE] [--strict]
                   [--client-procs] [--stop-on-violation] [--replicas]
                   [--lock fencedlock|fencedlock-acks|fencedlock-reacquire|redsync|
                           redislock|sentinel|all]

Runs real Redis nodes (local redis-server processes, or containers), K clients
that loop Lock -> fenced write -> hold -> Unlock on one key, and a seeded fault
schedule; then checks the history for mutual exclusion, fencing order,
duplicate tokens, stale writes accepted, lost writes, resurrected holds
(an extend that succeeds after another client acquired past its validity,
or that re-created the key after it) and liveness (stalls, starved clients,
and keys slow to pass from a release to their waiters).

The clients are goroutines of this process, unless --client-procs: then each
is a process of its own (this binary, started again), on this machine, that
talks to the nodes' loopback ports on either backend and reports its
operations to this process over a pipe. client-pause is then a real SIGSTOP
of the client process between its acquire and its write, held past its
validity, then SIGCONT; the report lists each stop (pid, time, token). A
client process that dies leaves the operations it had in flight failed
(outcome unknown) in the history.

With --replicas, each node is a primary with an asynchronous replica under
one Sentinel, as Redis is most often deployed; the node's address follows
the primary across failovers. The failover fault needs it: the replica is
promoted while it lags, so the writes its primary acknowledged last
(grants, fence counter increments) are lost. Kill, restart, pause and
clock skew act on the current primary, on either backend.

--lock picks the lock the workload drives: fencedlock (the default),
fencedlock-acks (fencedlock counting a grant once the node's replica has it;
needs --replicas), fencedlock-reacquire (fencedlock whose extensions
re-create a hold's key on a node that lost it, within validity), redsync
(Redlock on every node), redislock (one lock on node 0) or sentinel (SET NX
PX with an INCR token on node 0, a primary with a replica under Sentinel;
needs --replicas). A lock with no fencing token (redsync, redislock) writes
to the store unfenced, and its stale writes that reached the store are
counted; fencing order and duplicate tokens are n/a. The probes of the
nodes, lanes, --client-procs and client-clock-skew need fencedlock. --lock
all runs five of them (all but fencedlock-reacquire) one after another under
the same seed and fault schedule, each on fresh nodes (with --replicas for
all, which it turns on), prints a comparison table, writes one timeline per
lock next to --html (FILE-LOCK.html) with FILE the table linking them, and
puts the comparison in the JSON report (its single-run fields are
fencedlock's); its exit status is about fencedlock's two variants alone.
--history takes one lock that gives a token.
`

// chaosOwnNodes says what to do instead of giving chaos addresses.
const chaosOwnNodes = "chaos always starts its own nodes (--backend process or docker); " +
	"to check nodes of your own, use 'fencedlock doctor --nodes ADDRS'"

var chaosFooter = `Faults (--faults, comma-separated; default: the tolerated ones):
  tolerated:            ` + fault.Join(chaos.DefaultFaults()) + `
  assumption-breaking:  ` + fault.Join(fault.AssumptionBreaking()) + `
  (mutual-exclusion violations under these are reported as expected, unless
  --strict; the fenced store must still stay correct)
  hunt                  the hunt profile instead of a list: a seeded schedule of
                        episodes that build the states where lock protocols
                        break (overlapping majorities, amnesia rotation, lost
                        replies, restarts under long holds, clock jumps, late
                        heals, latency bursts and a clock drift within the
                        allowance on a majority), a node cut off right after
                        a lagging grant, and a workload on three keys (two
                        share a fence counter) with extensions, holds to and
                        past their validity, and late writes by former holders;
                        "hunt,KIND,..." adds kinds to it: with failover
                        (and --replicas) an episode fails one node over,
                        then a majority at once
  rolling               the rolling restarts instead of a list: the nodes
                        restart without their data one at a time, in turn,
                        each a TTL and a third plus a node timeout after the
                        one before answered again, while client 0 keeps one
                        auto-extended hold for the whole run and the others
                        contend for its key; with --lock fencedlock-reacquire
                        the hold survives, with fencedlock it is lost

Exit status:
  0  verdict ok: no violation the faults do not explain
  1  a violation under faults that should not cause one
  2  bad usage
  3  verdict unknown (too little happened to judge, or faults could not be
     injected: the report lists them), or the run could not be carried out
  130  interrupted (SIGINT or SIGTERM) before the run's duration was over:
     the reports cover the part that ran and say "interrupted"; a violation
     found in it still exits 1

Environment:
  FENCEDLOCK_LIBFAKETIME  path of libfaketime.so.1 for clock-skew faults on
                          the process backend (default: where Debian puts it)
  FENCEDLOCK_REDIS_IMAGE  the Redis image of the docker backend
`

func runChaos(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := newCommand("chaos", chaosHeader, chaosFooter)
	fs := cmd.fs
	var cfg chaos.Config
	nodeCount := countFlag{n: 5}
	fs.Var(&nodeCount, "nodes", "how many Redis nodes to start: a count `N`, not addresses (chaos starts its own)")
	fs.IntVar(&cfg.Clients, "clients", 8, "number of workload clients")
	fs.IntVar(&cfg.Lanes, "lanes", 0, "goroutines of each client sharing its lock client (0: 3 for the hunt, 1 otherwise)")
	fs.DurationVar(&cfg.Duration, "duration", 20*time.Second, "how long the workload runs")
	faults := fs.String("faults", fault.Join(chaos.DefaultFaults()), "faults to inject")
	seed := fs.Uint64("seed", 1, "seed of the fault schedule")
	fs.StringVar(&cfg.Backend, "backend", "process", "where the nodes run: process or docker")
	fs.DurationVar(&cfg.TTL, "ttl", time.Second, "lock TTL of the workload")
	fs.DurationVar(&cfg.NodeTimeout, "node-timeout", 100*time.Millisecond,
		"bound of each node call of the workload (below half the TTL; raise it on a loaded machine)")
	jsonPath := fs.String("json", "", "write the JSON report to `FILE`")
	htmlPath := fs.String("html", "", "write the HTML timeline to `FILE`")
	historyPath := fs.String("history", "", "write the run's history to `FILE`, as JSON Lines ('fencedlock check' reads it)")
	fs.BoolVar(&cfg.Strict, "strict", false, "count every violation, even under faults that break the lock's assumptions")
	fs.BoolVar(&cfg.ClientProcs, "client-procs", false,
		"run each client as an OS process of its own (slower; client-pause is a real SIGSTOP)")
	fs.BoolVar(&cfg.StopOnViolation, "stop-on-violation", false,
		"end the run ten TTLs after the first safety violation the faults do not explain (faults in progress may yet explain it); the report covers the run up to then")
	fs.BoolVar(&cfg.Replicas, "replicas", false,
		"make each node a primary with a replica under Sentinel (the failover fault needs it)")
	lock := fs.String("lock", chaos.LockFencedlock, "the lock to drive ("+strings.Join(chaos.Locks(), ", ")+"), or all to compare them")
	quiet := fs.Bool("quiet", false, "no live progress line")
	if code, ok := cmd.parse(args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return cmd.fail(stderr, "unexpected arguments %q", fs.Args())
	}
	var err error
	if cfg.Nodes, err = nodeCount.value("nodes to start", chaosOwnNodes); err != nil {
		return cmd.fail(stderr, "%v", err)
	}
	// Zero means default in chaos.Config; on the command line it is a mistake.
	switch {
	case cfg.Nodes < 1:
		return cmd.fail(stderr, "--nodes must be at least 1")
	case cfg.Clients < 1:
		return cmd.fail(stderr, "--clients must be at least 1")
	case cfg.Lanes < 0:
		return cmd.fail(stderr, "--lanes must not be negative")
	case cfg.Duration <= 0:
		return cmd.fail(stderr, "--duration must be positive")
	case cfg.TTL <= 0:
		return cmd.fail(stderr, "--ttl must be positive")
	case cfg.NodeTimeout <= 0:
		return cmd.fail(stderr, "--node-timeout must be positive")
	}
	rest, hunt := huntInList(*faults)
	if rolling, alone := rollingInList(*faults); rolling && !alone {
		return cmd.fail(stderr, "--faults %s: the %s profile takes no other kinds", *faults, chaos.ProfileRolling)
	} else if rolling {
		cfg.Profile, cfg.Faults = chaos.ProfileRolling, chaos.RollingFaults()
	} else if hunt {
		cfg.Profile, cfg.Faults = chaos.ProfileHunt, chaos.HuntFaults()
		extra, err := fault.Parse(rest)
		if err != nil {
			return cmd.fail(stderr, "%v (after %q, the hunt profile)", err, chaos.ProfileHunt)
		}
		for _, k := range extra {
			if !slices.Contains(cfg.Faults, k) {
				cfg.Faults = append(cfg.Faults, k)
			}
		}
	} else {
		list, err := fault.Parse(*faults)
		if err != nil {
			return cmd.fail(stderr, "%v (or %q, the hunt profile, or %q, the rolling restarts)", err, chaos.ProfileHunt, chaos.ProfileRolling)
		}
		cfg.Faults = list
		if cfg.Faults == nil {
			cfg.Faults = []fault.Kind{} // --faults "": no faults at all, not the default
		}
	}
	cfg.Seed = *seed
	if cfg.Seed == 0 {
		return cmd.fail(stderr, "--seed must be positive")
	}
	if !*quiet {
		cfg.Progress = stderr
	}

	if *lock == "all" && *historyPath != "" {
		return cmd.fail(stderr, "--history writes one run's history: use it with one --lock")
	}
	if *historyPath != "" && !chaos.HasToken(*lock) {
		// The history's tokens would be the harness's own numbering, which
		// 'fencedlock check' would judge as the lock's.
		return cmd.fail(stderr, "--history: lock %s gives no fencing token, and a history carries the lock's", *lock)
	}
	if *lock == "all" {
		cfg.Replicas = true // fencedlock-acks and sentinel need them, and the runs differ in the lock alone
	} else {
		cfg.Lock = *lock
	}

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	clients := "clients"
	if cfg.ClientProcs {
		clients = "client processes"
	}
	profile := fault.Join(cfg.Faults)
	if cfg.Profile != "" {
		profile = cfg.Profile + " (" + profile + ")"
	}
	nodes := "nodes"
	if cfg.Replicas {
		nodes = "nodes (each a primary with a replica)"
	}
	fmt.Fprintf(stderr, "chaos: %d %s %s, %d %s, %v, faults %s, seed %d, lock %s\n",
		cfg.Nodes, cfg.Backend, nodes, cfg.Clients, clients, cfg.Duration, profile, cfg.Seed, *lock)
	if *lock == "all" {
		return runCompare(ctx, cmd, cfg, *jsonPath, *htmlPath, stdout, stderr)
	}
	run, err := chaos.Run(ctx, cfg)
	switch {
	case errors.Is(err, chaos.ErrConfig):
		return cmd.fail(stderr, "%v", err)
	case errors.Is(err, chaos.ErrInjection):
		// The run happened, with faults missing: report it, verdict unknown.
		fmt.Fprintf(stderr, "fencedlock chaos: %v\n", err)
	case err != nil && ctx.Err() != nil:
		fmt.Fprintf(stderr, "fencedlock chaos: interrupted: %v\n", err)
		return exitInterrupted
	case err != nil:
		fmt.Fprintf(stderr, "fencedlock chaos: %v\n", err)
		return 3
	}
	if *historyPath != "" {
		if err := writeFile(*historyPath, func(w io.Writer) error { return history.WriteJSONL(w, run.History) }); err != nil {
			fmt.Fprintf(stderr, "fencedlock chaos: %v\n", err)
			return 3
		}
		fmt.Fprintf(stderr, "wrote %s\n", *historyPath)
	}
	if code, ok := writeReports(run, *jsonPath, *htmlPath, stdout, stderr, "chaos"); !ok {
		return code
	}
	if run.Interrupted && run.Result.Verdict != checker.VerdictViolated {
		return exitInterrupted
	}
	return verdictStatus(run.Result.Verdict)
}

// writeReports prints the text summary of run and writes the JSON report
// and the HTML timeline to the paths that are set. On failure it returns 3.
func writeReports(run report.Run, jsonPath, htmlPath string, stdout, stderr io.Writer, name string) (int, bool) {
	rep := report.New(run)
	if err := rep.WriteText(stdout); err != nil {
		fmt.Fprintf(stderr, "fencedlock %s: %v\n", name, err)
		return 3, false
	}
	if jsonPath != "" {
		if err := writeFile(jsonPath, rep.WriteJSON); err != nil {
			fmt.Fprintf(stderr, "fencedlock %s: %v\n", name, err)
			return 3, false
		}
		fmt.Fprintf(stderr, "wrote %s\n", jsonPath)
	}
	if htmlPath != "" {
		if err := writeFile(htmlPath, func(w io.Writer) error { return report.WriteHTML(w, run) }); err != nil {
			fmt.Fprintf(stderr, "fencedlock %s: %v\n", name, err)
			return 3, false
		}
		fmt.Fprintf(stderr, "wrote %s\n", htmlPath)
	}
	return 0, true
}

// verdictStatus is the exit status of a verdict: 0 ok, 1 violated, 3 unknown.
func verdictStatus(v checker.Verdict) int {
	switch v {
	case checker.VerdictOK:
		return exitOK
	case checker.VerdictViolated:
		return exitFailure
	}
	return 3
}

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}

// rollingInList reports whether list (--faults) names the rolling
// profile, and whether alone.
func rollingInList(list string) (rolling, alone bool) {
	ks := strings.Split(list, ",")
	for _, k := range ks {
		if strings.TrimSpace(k) == chaos.ProfileRolling {
			return true, len(ks) == 1
		}
	}
	return false, false
}

// huntInList reports whether list (--faults) names the hunt profile, and
// returns the other kinds in it: "hunt,failover" is the hunt with failovers
// added.
func huntInList(list string) (rest string, hunt bool) {
	var others []string
	for _, k := range strings.Split(list, ",") {
		if strings.TrimSpace(k) == chaos.ProfileHunt {
			hunt = true
			continue
		}
		others = append(others, k)
	}
	return strings.Join(others, ","), hunt
}
