package redlock_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/clock"
	"github.com/fencedlock/fencedlock/redlock"
)

// TestHeldLockHeap: what a held, watched, auto-extended Lock keeps on the
// heap stays within 2 KB on 5 nodes (the target of the many-holds bench).
// Measured as what the heap gives back, after a GC, once the holds are
// gone — Close ends them (no call goes out for that) and the test drops
// them — so that nothing else the Client or go-redis holds (connections,
// whose buffers are 64 KiB each, workers) is counted. The fake clock keeps
// every extension off the wire meanwhile. Before, the attempt that a Lock
// keeps held a replies buffer for every call it might make (n·(1+maxReasks)
// replies) and its answers, a Done a timer and a goroutine.
func TestHeldLockHeap(t *testing.T) {
	const (
		nodes  = 5
		holds  = 1000
		target = 2048 // bytes per hold
	)
	r := newRig(t, nodes)
	c := r.client(t, redlock.WithClock(clock.NewFake(epoch)))
	ctx := t.Context()
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	locks := make([]*redlock.Lock, holds)
	for i := range locks {
		l, err := c.TryLock(ctx, fmt.Sprintf("held:%d", i), time.Minute, redlock.AutoExtend())
		if err != nil {
			t.Fatal(err)
		}
		_ = l.Done()
		locks[i] = l
	}
	held := heap()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	clear(locks)
	gone := heap()
	perHold := (float64(held) - float64(gone)) / holds
	t.Logf("%.0f B of heap per held Lock on %d nodes", perHold, nodes)
	if perHold > target {
		t.Errorf("%.0f B of heap per held Lock, want ≤ %d", perHold, target)
	}
}
