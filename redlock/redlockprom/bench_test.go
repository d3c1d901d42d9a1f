package redlockprom_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/redlock"
	"github.com/fencedlock/fencedlock/redlock/redlockprom"
)

// BenchmarkObserved: serial uncontended TryLock+Unlock on 3 local nodes,
// without an Observer and with the Prometheus one, for what it costs.
func BenchmarkObserved(b *testing.B) {
	var nodes []redis.UniversalClient
	for _, addr := range redisAddrs {
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		b.Cleanup(func() { _ = rdb.Close() })
		nodes = append(nodes, rdb)
	}
	m, err := redlockprom.New(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		opts []redlock.Option
	}{
		{"none", nil},
		{"prometheus", []redlock.Option{redlock.WithObserver(m)}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c, err := redlock.New(nodes, bc.opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			ctx := b.Context()
			b.ReportAllocs()
			for b.Loop() {
				l, err := c.TryLock(ctx, "bench", 10*time.Second)
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
