package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fencedlock/fencedlock/bench/contender"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// go-redis dials new connections in goroutines of its own, which
		// sleep between retries and can outlive the client's Close for a
		// moment after the paused scenario (seen with go-redis v9.23.0).
		goleak.IgnoreTopFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).dialConn"),
		// And once a pool has failed to dial the node the multiclient
		// scenario killed, a probe of its own that sleeps 1s between dials
		// and sees the pool closed only when it wakes.
		goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}

// A very short full run: every scenario but multiclient (which has tests of
// its own, in multiclient_test.go), every library, JSON and SVG out. It
// catches a broken harness, not a slow library.
func TestShortRun(t *testing.T) {
	dir := t.TempDir()
	jsonPath, svgPath := filepath.Join(dir, "r.json"), filepath.Join(dir, "w.svg")
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{
		// One round of 400ms: redsync's waiters retry every 50-250ms, and a
		// shorter window can close before any of them got the lock. No
		// warm-up: a Lock cut off by its end can leave the key taken (the
		// SET went out, the reply was abandoned) for the measured phase.
		"--scenarios", "serial,parallel,onekey,paused",
		"--duration", "400ms", "--rounds", "1", "--warmup", "0s", "--goroutines", "8", "--waiters", "4",
		"--json", jsonPath, "--svg", svgPath, "-q",
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
	want := map[string][]string{
		scSerial:     {contender.Fencedlock, contender.Redsync, contender.Redislock, contender.Raw},
		scParallel:   {contender.Fencedlock, contender.Redsync, contender.Redislock, contender.Raw},
		scOneKey:     {contender.Fencedlock, contender.Redsync, contender.Redislock},
		scPausedBase: {contender.Fencedlock, contender.Redsync, contender.RedsyncFailFast, contender.Raw},
		scPaused:     {contender.Fencedlock, contender.Redsync, contender.RedsyncFailFast, contender.Raw},
	}
	got := map[string]*Result{}
	for _, r := range rep.Results {
		got[r.Scenario+"/"+r.Library] = r
	}
	for sc, libs := range want {
		for _, lib := range libs {
			r := got[sc+"/"+lib]
			switch {
			case r == nil:
				t.Errorf("%s/%s: missing from the JSON", sc, lib)
			case r.Ops <= 0 || r.OpsPerSec <= 0:
				t.Errorf("%s/%s: ops %d, ops/s %g", sc, lib, r.Ops, r.OpsPerSec)
			case r.P50Ms < 0 || r.P50Ms > r.P99Ms || r.P99Ms > r.MaxMs:
				t.Errorf("%s/%s: p50 %g p99 %g max %g out of order", sc, lib, r.P50Ms, r.P99Ms, r.MaxMs)
			case sc != scOneKey && r.P50Ms <= 0:
				t.Errorf("%s/%s: p50 %g", sc, lib, r.P50Ms)
			case r.AllocsPerOp <= 0:
				t.Errorf("%s/%s: allocs/op %g", sc, lib, r.AllocsPerOp)
			case sc == scOneKey && (r.PerGoroutineMax == nil || *r.PerGoroutineMax <= 0 || len(r.CDF) == 0):
				t.Errorf("%s/%s: no fairness or CDF", sc, lib)
			}
		}
	}
	if len(rep.Ratios) != 15 { // 2 of them multiclient-defaults', 2 replicas'
		t.Errorf("%d ratios, want 15", len(rep.Ratios))
	}
	for _, r := range rep.Ratios {
		switch {
		case strings.HasPrefix(r.Name, scMultiClient), strings.HasPrefix(r.Name, scReplicas): // not run here
			if r.Value != nil || r.Status != "n/a" {
				t.Errorf("ratio %q of a scenario not run: value %v status %q", r.Name, r.Value, r.Status)
			}
		case r.Value == nil || (r.Status != "met" && r.Status != "MISSED"):
			t.Errorf("ratio %q: value %v status %q", r.Name, r.Value, r.Status)
		}
	}
	if got[scMultiClient+"/"+contender.Fencedlock] != nil {
		t.Errorf("multiclient ran without being asked for")
	}
	if rep.Machine.Nodes != 5 || rep.Machine.Cores < 1 || rep.Machine.Redis == "" {
		t.Errorf("machine %+v", rep.Machine)
	}

	svg, err := os.ReadFile(svgPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"<svg", "</svg>", "<polyline", contender.Fencedlock, contender.Redsync} {
		if !bytes.Contains(svg, []byte(s)) {
			t.Errorf("SVG has no %q", s)
		}
	}
	for _, s := range []string{"ratio", "onekey fairness", "serial p50: fencedlock / raw"} {
		if !strings.Contains(stdout.String(), s) {
			t.Errorf("table has no %q:\n%s", s, stdout.String())
		}
	}
}

func TestBadUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--scenarios", "nope"},
		{"--libs", "nope"},
		{"--duration", "0"},
		{"--clients", "0"},
		{"--client-goroutines", "0"},
		{"--node-timeout", "20s", "--ttl", "10s"},
		{"extra"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var out bytes.Buffer
			if code := run(t.Context(), args, &out, &out); code != 2 {
				t.Errorf("exit %d, want 2; output:\n%s", code, out.String())
			}
		})
	}
}

func TestHistQuantiles(t *testing.T) {
	var h hist
	for i := 1; i <= 1000; i++ {
		h.record(time.Duration(i) * time.Microsecond)
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{
		{0.5, 500 * time.Microsecond},
		{0.99, 990 * time.Microsecond},
		{1, 1000 * time.Microsecond},
	} {
		got := h.quantile(tc.q)
		if d := float64(got-tc.want) / float64(tc.want); d < -0.02 || d > 0.02 {
			t.Errorf("q%g = %v, want %v within 2%%", tc.q, got, tc.want)
		}
	}
	if h.max != time.Millisecond || h.min != time.Microsecond || h.n != 1000 {
		t.Errorf("min %v max %v n %d", h.min, h.max, h.n)
	}
	for _, d := range []time.Duration{0, 1, 63, 64, 65, 1000, time.Second, time.Hour} {
		if i := bucketOf(d); bucketUpper(i) < d || (i > 0 && bucketUpper(i-1) >= d) {
			t.Errorf("%v: bucket %d spans (%v, %v]", d, i, bucketUpper(i-1), bucketUpper(i))
		}
	}
	pts := h.cdf()
	if len(pts) == 0 || pts[len(pts)-1].F != 1 {
		t.Errorf("cdf ends at %v", pts[len(pts)-1])
	}
}
