package redlockprom_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"

	"github.com/fencedlock/fencedlock/fencing"
	"github.com/fencedlock/fencedlock/redlock"
	"github.com/fencedlock/fencedlock/redlock/redlockotel"
	"github.com/fencedlock/fencedlock/redlock/redlockprom"
)

// Example is the README's "Metrics and tracing" snippet: Prometheus
// metrics and OpenTelemetry spans of the locks, and the guard's
// admissions and stale-write rejections.
func Example() {
	// Your independent Redis servers (here: those the tests started).
	var nodes []redis.UniversalClient
	for _, addr := range redisAddrs {
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		defer rdb.Close()
		nodes = append(nodes, rdb)
	}
	mux := http.NewServeMux()

	// README begins
	reg := prometheus.NewRegistry() // or prometheus.DefaultRegisterer
	metrics, err := redlockprom.New(reg)
	if err != nil {
		panic(err)
	}
	tracing := redlockotel.New(otel.GetTracerProvider()) // spans; keys hashed unless redlockotel.WithKeys()
	locks, err := redlock.New(nodes, redlock.WithObserver(redlock.Observers(metrics, tracing)))
	if err != nil {
		panic(err)
	}
	defer locks.Close()
	store := fencing.NewRedis(nodes[0], fencing.WithObserver(metrics)) // admissions, stale-write rejections
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	// README ends

	ctx := context.Background()
	l, err := locks.TryLock(ctx, "invoice:42", 10*time.Second)
	if err != nil {
		panic(err)
	}
	fmt.Println("admitted:", store.Admit(ctx, "invoice-42", l.Token()))
	fmt.Println("unlock:", l.Unlock(ctx))

	fams, _ := reg.Gather()
	for _, f := range fams {
		if f.GetName() == "fencedlock_fencing_admitted_total" || f.GetName() == "fencedlock_releases_total" {
			fmt.Println(f.GetName(), f.GetMetric()[0].GetCounter().GetValue())
		}
	}
	// Output:
	// admitted: <nil>
	// unlock: <nil>
	// fencedlock_fencing_admitted_total 1
	// fencedlock_releases_total 1
}

// TestREADMEMetricsExample checks that the README's Go block under
// "Metrics and tracing" is Example's, which compiles and runs.
func TestREADMEMetricsExample(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(readme), "## Metrics and tracing\n")
	_, after, ok2 := strings.Cut(after, "```go\n")
	block, _, closed := strings.Cut(after, "```\n")
	if !ok || !ok2 || !closed {
		t.Fatal(`README: no Go block under "## Metrics and tracing"`)
	}
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ := strings.Cut(string(src), "\t// README begins\n")
	body, _, _ = strings.Cut(body, "\t// README ends\n")
	var want strings.Builder
	for line := range strings.Lines(body) {
		want.WriteString(strings.TrimPrefix(line, "\t"))
	}
	if block != want.String() {
		t.Errorf("README block:\n%s\nwant (Example):\n%s", block, want.String())
	}
}
