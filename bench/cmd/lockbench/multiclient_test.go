package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/bench/contender"
	"github.com/fencedlock/fencedlock/internal/redistest"
	"github.com/fencedlock/fencedlock/redlock"
)

// A short run of just the multiclient scenario, through the command line:
// both phases, both libraries, counted, with fairness per goroutine and per
// client, and the four ratios. It catches a broken harness, not a slow
// library: a library may make no acquisition in one phase on a loaded
// machine (seen with fencedlock under -race), so each must have counted
// some over the two, and a ratio with a side at zero must say n/a.
func TestMultiClientRun(t *testing.T) {
	const clients, perClient = 3, 2
	jsonPath := filepath.Join(t.TempDir(), "r.json")
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{
		"--scenarios", scMultiClient,
		// One round of 1s per library per phase: with a node killed, each
		// acquire and each release of redsync waits out the node timeout on
		// it, and its waiters retry every 50-250ms. The warm-up runs on a
		// key of its own, so a Lock it cuts off cannot leave the measured
		// key taken.
		"--duration", "1s", "--rounds", "1", "--warmup", "100ms",
		"--clients", "3", "--client-goroutines", "2",
		"--node-timeout", coldNodeTimeout(t, redistest.Start(t).Addr()).String(),
		"--json", jsonPath, "-q",
	}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Settings.Clients != clients || rep.Settings.ClientGoroutines != perClient {
		t.Errorf("settings: clients %d, client goroutines %d", rep.Settings.Clients, rep.Settings.ClientGoroutines)
	}
	var rows []string
	for _, r := range rep.Results {
		rows = append(rows, r.Scenario+"/"+r.Library)
	}
	want := []string{
		scMultiClient + "/" + contender.Fencedlock, scMultiClient + "/" + contender.Redsync,
		scMultiClientDown + "/" + contender.Fencedlock, scMultiClientDown + "/" + contender.Redsync,
	}
	if !slices.Equal(rows, want) {
		t.Fatalf("rows %v, want %v", rows, want)
	}
	ops := map[string]int64{}
	anyZero := false
	for _, r := range rep.Results {
		name := r.Scenario + "/" + r.Library
		ops[r.Library] += r.Ops
		anyZero = anyZero || r.Ops == 0
		switch {
		case r.Ops < 0 || (r.Ops > 0) != (r.OpsPerSec > 0) || r.Seconds <= 0:
			t.Errorf("%s: ops %d, ops/s %g in %gs", name, r.Ops, r.OpsPerSec, r.Seconds)
		case r.P50Ms > r.P99Ms || r.P99Ms > r.MaxMs:
			t.Errorf("%s: p50 %g p99 %g max %g out of order", name, r.P50Ms, r.P99Ms, r.MaxMs)
		case (r.Ops > 0) != (r.CmdsPerOp > 0):
			t.Errorf("%s: %d ops, cmds/op %g", name, r.Ops, r.CmdsPerOp)
		case r.PerGoroutineMin == nil || r.PerClientMin == nil || r.Clients != clients || (r.Ops > 0) != (len(r.CDF) > 0):
			t.Errorf("%s: no fairness or CDF: %+v", name, r)
		case *r.PerClientMax > r.Ops || *r.PerClientMin*clients > r.Ops || *r.PerClientMax*clients < r.Ops,
			*r.PerGoroutineMax > *r.PerClientMax || *r.PerGoroutineMin*perClient > *r.PerClientMin:
			t.Errorf("%s: %d ops, per goroutine %d-%d, per client %d-%d do not add up", name, r.Ops,
				*r.PerGoroutineMin, *r.PerGoroutineMax, *r.PerClientMin, *r.PerClientMax)
		case (r.Scenario == scMultiClientDown) != (r.NodesDown == 1):
			t.Errorf("%s: nodes down %d", name, r.NodesDown)
		}
	}
	for _, lib := range []string{contender.Fencedlock, contender.Redsync} {
		if ops[lib] == 0 {
			t.Errorf("%s: no acquisition counted in either phase:\n%s", lib, describe(rep.Results))
		}
	}
	n := 0
	for _, r := range rep.Ratios {
		if !strings.HasPrefix(r.Name, scMultiClient) || strings.HasPrefix(r.Name, scMultiClientDefaults) { // not run here
			continue
		}
		n++
		switch {
		case r.Value != nil && r.Status != "met" && r.Status != "MISSED",
			r.Value == nil && (r.Status != "n/a" || !anyZero):
			t.Errorf("ratio %q: value %v status %q (%s)", r.Name, r.Value, r.Status, describe(rep.Results))
		}
	}
	if n != 4 {
		t.Errorf("%d multiclient ratios, want 4", n)
	}
	for _, s := range []string{"multiclient fairness", "per-client (3)", "multiclient-down", "multiclient-down acq/s: fencedlock / its healthy"} {
		if !strings.Contains(stdout.String(), s) {
			t.Errorf("table has no %q:\n%s", s, stdout.String())
		}
	}
}

// The down phase runs with the last node killed, and the node is back,
// answering, when the scenario returns. The nodes keep no data, so the
// killed node comes back without the fence counter of either phase's key,
// while the others have both.
func TestMultiClientKillsAndRestores(t *testing.T) {
	procs := redistest.StartN(t, 5)
	o, err := parseFlags([]string{
		"--libs", contender.Fencedlock, "--duration", "300ms", "--rounds", "1", "--warmup", "0s",
		"--clients", "2", "--client-goroutines", "2",
		"--node-timeout", coldNodeTimeout(t, procs[0].Addr()).String(),
	}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	redis.SetLogger(new(redisLog)) // as bench does: the failed dials to the killed node
	e := &env{opts: o, procs: procs, log: t.Logf}
	for _, p := range procs {
		e.addrs = append(e.addrs, p.Addr())
	}
	rs, err := e.runMultiClient(t.Context(), scMultiClient)
	if err != nil {
		t.Fatal(err)
	}
	// Acquisitions are not the point here (TestMultiClientRun counts them):
	// every live node has a phase's fence counter from its first grant.
	if len(rs) != 2 || rs[0].Scenario != scMultiClient || rs[1].Scenario != scMultiClientDown {
		t.Fatalf("want the 2 phases; got %s", describe(rs))
	}
	for i, p := range procs {
		c := redis.NewClient(&redis.Options{Addr: p.Addr()})
		for _, phase := range []string{scMultiClient, scMultiClientDown} {
			key := redlock.FenceKey("lockbench:" + phase + ":" + contender.Fencedlock)
			n, err := c.Exists(t.Context(), key).Result()
			switch {
			case err != nil:
				t.Errorf("node %d: %v", i, err)
			case i == e.killedNode() && n != 0:
				t.Errorf("killed node %d has %s: it was not killed, or not for the whole phase", i, key)
			case i != e.killedNode() && n != 1:
				t.Errorf("node %d has no %s (%s)", i, key, describe(rs))
			}
		}
		_ = c.Close()
	}
}

// coldNodeTimeout returns the per-node timeout for a short multiclient run:
// 40 times the median of a few cold round trips to addr (a new client's
// dial, handshake and PING) measured now, and never under lockbench's
// default of 50ms. A run starts cold: every instance dials every node at
// once, and a handshake that misses its call's deadline is dropped and
// dialled again. With a fixed 50ms, under -race on a loaded 2-core machine,
// a whole phase ended with no command executed on any node (measured: cold
// round trips of about 4ms, 0 acquisitions in 300ms; with 200ms, none
// missed in 5 runs).
func coldNodeTimeout(t *testing.T, addr string) time.Duration {
	t.Helper()
	rtts := make([]time.Duration, 5)
	for i := range rtts {
		c := redis.NewClient(&redis.Options{Addr: addr})
		start := time.Now()
		err := c.Ping(t.Context()).Err()
		rtts[i] = time.Since(start)
		_ = c.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(rtts)
	d := max(50*time.Millisecond, 40*rtts[len(rtts)/2]).Round(time.Millisecond)
	t.Logf("cold round trips %v: node timeout %v", rtts, d)
	return d
}

func TestPerClient(t *testing.T) {
	for _, tc := range []struct {
		perG    []int64
		clients int
		lo, hi  int64
	}{
		{[]int64{1, 2, 3, 4, 5, 6}, 3, 3, 11},
		{[]int64{1, 2, 3, 4, 5, 6}, 2, 6, 15},
		{[]int64{7, 0, 0, 0}, 4, 0, 7},
		{[]int64{4, 5}, 1, 9, 9},
	} {
		if lo, hi := perClient(tc.perG, tc.clients); lo != tc.lo || hi != tc.hi {
			t.Errorf("perClient(%v, %d) = %d, %d; want %d, %d", tc.perG, tc.clients, lo, hi, tc.lo, tc.hi)
		}
	}
}

// The four multiclient ratios, from results made up for the purpose: which
// rows each divides, and which way its target points.
func TestMultiClientRatios(t *testing.T) {
	row := func(sc, lib string, rate, p99 float64) *Result {
		return &Result{Scenario: sc, Library: lib, Ops: 100, OpsPerSec: rate, P99Ms: p99, MaxMs: p99}
	}
	rep := &Report{Results: []*Result{
		row(scMultiClient, contender.Fencedlock, 400, 10),
		row(scMultiClient, contender.Redsync, 300, 100),
		row(scMultiClientDown, contender.Fencedlock, 100, 50),
		row(scMultiClientDown, contender.Redsync, 10, 1000),
	}}
	rep.computeRatios()
	want := map[string]struct {
		v      float64
		status string
	}{
		"multiclient acq/s: fencedlock / redsync":          {400.0 / 300, "met"},
		"multiclient wait p99: fencedlock / redsync":       {0.1, "met"},
		"multiclient-down acq/s: fencedlock / its healthy": {0.25, "MISSED"},
		"multiclient-down wait p99: fencedlock / redsync":  {0.05, "met"},
	}
	seen := 0
	for _, r := range rep.Ratios {
		w, ok := want[r.Name]
		if !ok {
			continue
		}
		seen++
		if r.Value == nil || math.Abs(*r.Value-w.v) > 1e-9 || r.Status != w.status {
			t.Errorf("%s: value %v status %q, want %g %q", r.Name, r.Value, r.Status, w.v, w.status)
		}
	}
	if seen != len(want) {
		t.Errorf("%d of the %d multiclient ratios computed", seen, len(want))
	}
}

func describe(rs []*Result) string {
	var s []string
	for _, r := range rs {
		s = append(s, fmt.Sprintf("%s/%s: %d ops, %d errors (%s), %d cut off", r.Scenario, r.Library, r.Ops, r.Errors, r.FirstError, r.CutOffWaits))
	}
	return strings.Join(s, "; ")
}
