package bench_test

import (
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/bench/contender"
	"github.com/fencedlock/fencedlock/internal/redistest"
)

// Side-by-side Go benchmarks on 5 local redis-server nodes, one set per
// top-level benchmark, shared by its sub-benchmarks:
//
//	go test -run '^$' -bench . -benchmem -count 6 | tee new.txt   # benchstat-friendly
//
// ns/op is one TryLock+Unlock; allocs/op counts the whole process (the
// libraries' background goroutines included), like cmd/lockbench.

var libs = []string{contender.Fencedlock, contender.Redsync, contender.Redislock, contender.Raw}

func nodes(b *testing.B) []string {
	b.Helper()
	var as []string
	for _, p := range redistest.StartN(b, 5) {
		as = append(as, p.Addr())
	}
	return as
}

func open(b *testing.B, lib string, addrs []string) contender.Locker {
	b.Helper()
	// Each library's own per-node timeout (TTL/20 for fencedlock and redsync).
	l, err := contender.New(lib, addrs, contender.Config{TTL: 10 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = l.Close() })
	return l
}

// BenchmarkSerial: one goroutine, one key, uncontended acquire+release.
func BenchmarkSerial(b *testing.B) {
	addrs := nodes(b)
	for _, lib := range libs {
		b.Run(lib, func(b *testing.B) {
			s := open(b, lib, addrs).Session("bench:serial:" + lib)
			ctx := b.Context()
			b.ReportAllocs()
			for b.Loop() {
				if err := s.TryLock(ctx); err != nil {
					b.Fatal(err)
				}
				if err := s.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkParallel64: 64 goroutines, each on its own key.
func BenchmarkParallel64(b *testing.B) {
	addrs := nodes(b)
	for _, lib := range libs {
		b.Run(lib, func(b *testing.B) {
			l := open(b, lib, addrs)
			ctx := b.Context()
			var id atomic.Int64
			b.SetParallelism((64 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				s := l.Session("bench:parallel:" + lib + ":" + strconv.FormatInt(id.Add(1), 10))
				for pb.Next() {
					if err := s.TryLock(ctx); err != nil {
						b.Error(err)
						return
					}
					if err := s.Unlock(ctx); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
