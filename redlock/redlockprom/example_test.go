package redlockprom_test

import (
	"context"
	"fmt"
	"net/http"
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

	// doc block: README.md
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
	// end doc block

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
