package redlock_test

import (
	"slices"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/redlock"
)

// BenchmarkReplicaAcks: serial uncontended TryLock+Unlock on 3 primaries
// with one replica each, without replica acknowledgements and with one:
// what WAIT adds to an acquisition (the release is not waited for). The
// p50 and p99 of one TryLock+Unlock are reported in microseconds.
func BenchmarkReplicaAcks(b *testing.B) {
	pairs := startPairs(b, 3)
	nodes := primaries(b, pairs)
	for _, acks := range []int{0, 1} {
		b.Run("acks="+string(rune('0'+acks)), func(b *testing.B) {
			c, err := redlock.New(nodes, redlock.WithReplicaAcks(acks))
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			ctx := b.Context()
			var took []time.Duration
			for b.Loop() {
				start := time.Now()
				l, err := c.TryLock(ctx, "bench:acks", 10*time.Second)
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
				took = append(took, time.Since(start))
			}
			slices.Sort(took)
			at := func(q float64) float64 {
				return float64(took[int(q*float64(len(took)-1))].Microseconds())
			}
			b.ReportMetric(at(0.50), "p50-µs")
			b.ReportMetric(at(0.99), "p99-µs")
		})
	}
}
