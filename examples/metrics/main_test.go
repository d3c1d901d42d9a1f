package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/goleak"

	"github.com/fencedlock/fencedlock/internal/redistest"
	"github.com/fencedlock/fencedlock/redlock/redlockprom"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestWorkloadMetrics runs the example's workload, scrapes /metrics over
// HTTP, and checks every metric against what the workload counted itself.
func TestWorkloadMetrics(t *testing.T) {
	nodes := redistest.Clients(t, redistest.StartN(t, 3))
	reg := prometheus.NewRegistry()
	m, err := redlockprom.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(handler(reg))
	defer srv.Close()

	w := Workload{Workers: 6, Rounds: 12, Key: "metrics-test", TTL: time.Second, Hold: 2 * time.Millisecond}
	tally, err := w.Run(t.Context(), nodes, m)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("workload: %+v", tally)
	if tally.Acquired < 2 || tally.LateWrites == 0 {
		t.Fatalf("workload acquired %d holds and made %d late writes: too few to check", tally.Acquired, tally.LateWrites)
	}

	fams := scrape(t, srv.URL+"/metrics")
	outcome := func(o string) float64 { return value(t, fams, "fencedlock_acquire_total", "outcome", o) }
	var sum float64
	for _, o := range []string{redlockprom.Acquired, redlockprom.Refused, redlockprom.NodeError, redlockprom.Canceled, redlockprom.DeadlineExceeded} {
		sum += outcome(o)
	}
	checks := []struct {
		name      string
		got, want float64
	}{
		{"acquire_total{outcome=acquired}", outcome(redlockprom.Acquired), float64(tally.Acquired)},
		{"acquire_total summed over outcomes", sum, float64(tally.Calls)},
		{"acquire_total{outcome=deadline_exceeded}", outcome(redlockprom.DeadlineExceeded), float64(tally.Deadline)},
		{"acquire_total{outcome=refused}", outcome(redlockprom.Refused), float64(tally.Calls - tally.Acquired - tally.Deadline - tally.NodeErrors)},
		{"acquire_total{outcome=node_error}", outcome(redlockprom.NodeError), float64(tally.NodeErrors)},
		{"acquire_total{outcome=canceled}", outcome(redlockprom.Canceled), 0},
		{"acquire_wait_seconds_count{outcome=acquired}", count(t, fams, "fencedlock_acquire_wait_seconds", "outcome", redlockprom.Acquired), float64(tally.Acquired)},
		{"hold_seconds_count", count(t, fams, "fencedlock_hold_seconds", "", ""), float64(tally.Acquired)},
		{"held_locks", value(t, fams, "fencedlock_held_locks", "", ""), 0},
		{"extensions_total", value(t, fams, "fencedlock_extensions_total", "", ""), float64(tally.Extended)},
		{"releases_total", value(t, fams, "fencedlock_releases_total", "", ""), float64(tally.Released)},
		{"losses_total", value(t, fams, "fencedlock_losses_total", "", ""), float64(tally.Acquired - tally.Released)},
		{"fencing_admitted_total", value(t, fams, "fencedlock_fencing_admitted_total", "", ""), float64(tally.Admitted)},
		{"fencing_rejected_total", value(t, fams, "fencedlock_fencing_rejected_total", "", ""), float64(tally.StaleRejected)},
		{"fencing_rejected_total vs late writes", value(t, fams, "fencedlock_fencing_rejected_total", "", ""), float64(tally.LateWrites)},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	// Every acquire call goes to every node: each answers it, or fails.
	for i := range nodes {
		node := strconv.Itoa(i)
		trips := count(t, fams, "fencedlock_node_round_trip_seconds", "node", node)
		var errs float64
		for _, mt := range fams["fencedlock_node_errors_total"].GetMetric() {
			if label(mt, "node") == node {
				errs += mt.GetCounter().GetValue()
			}
		}
		if trips+errs < float64(tally.Acquired) {
			t.Errorf("node %d: %v round trips and %v errors, fewer than the %d acquisitions", i, trips, errs, tally.Acquired)
		}
	}
}

// TestRun runs the program as `go run` would, with --exit.
func TestRun(t *testing.T) {
	procs := redistest.StartN(t, 3)
	var out bytes.Buffer
	args := []string{"--nodes", procs[0].Addr() + "," + procs[1].Addr() + "," + procs[2].Addr(),
		"--listen", "127.0.0.1:0", "--workers", "3", "--rounds", "4", "--exit"}
	if err := run(t.Context(), args, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, &out)
	}
	for _, want := range []string{"metrics: http://127.0.0.1:", "12 lock calls: "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, &out)
		}
	}
	if err := run(t.Context(), []string{"--workers", "0"}, &out); err == nil {
		t.Error("run with --workers 0: no error")
	}
}

// scrape GETs url and parses the Prometheus text format.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	req, err := http.NewRequestWithContext(context.WithoutCancel(t.Context()), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// series is the metric of family name whose label k is v (any, for k "").
func series(t *testing.T, fams map[string]*dto.MetricFamily, name, k, v string) *dto.Metric {
	t.Helper()
	for _, m := range fams[name].GetMetric() {
		if k == "" || label(m, k) == v {
			return m
		}
	}
	t.Fatalf("no %s{%s=%q} in the scrape", name, k, v)
	return nil
}

// value is a counter's or gauge's value.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name, k, v string) float64 {
	m := series(t, fams, name, k, v)
	if m.Counter != nil {
		return m.GetCounter().GetValue()
	}
	return m.GetGauge().GetValue()
}

// count is a histogram's sample count.
func count(t *testing.T, fams map[string]*dto.MetricFamily, name, k, v string) float64 {
	return float64(series(t, fams, name, k, v).GetHistogram().GetSampleCount())
}
