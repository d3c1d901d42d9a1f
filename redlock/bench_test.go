package redlock_test

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkAcquireRelease: serial uncontended TryLock+Unlock on 5 local
// nodes, fencing included.
func BenchmarkAcquireRelease(b *testing.B) { benchAcquireRelease(b, 1) }

// BenchmarkAcquireReleaseParallel: 64 goroutines on distinct keys.
func BenchmarkAcquireReleaseParallel(b *testing.B) { benchAcquireRelease(b, 64) }

func benchAcquireRelease(b *testing.B, par int) {
	r := newRig(b, 5)
	c := r.client(b)
	ctx := b.Context()
	b.ReportAllocs()
	if par <= 1 {
		for b.Loop() {
			l, err := c.TryLock(ctx, "bench", 10*time.Second)
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Unlock(ctx); err != nil {
				b.Fatal(err)
			}
		}
		return
	}
	b.SetParallelism(par)
	var id atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		key := "bench:" + strconv.FormatInt(id.Add(1), 10)
		for pb.Next() {
			l, err := c.TryLock(ctx, key, 10*time.Second)
			if err != nil {
				b.Error(err)
				return
			}
			if err := l.Unlock(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
