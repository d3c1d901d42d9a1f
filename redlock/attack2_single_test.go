package redlock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/redlock"
)

// One process, several goroutines on one key: each release wakes the next
// local head at once (wake), so each acquisition takes one attempt, one
// SET per node. The nodes' announcements of this process's own releases
// come later and must not wake the head after it: it would ask while the
// key is held, and be refused. Counted on the nodes; the backoff is long,
// so that only releases wake heads.
func TestAttack2SingleProcessAsksOncePerHold(t *testing.T) {
	r := newRig(t, 5)
	for i, c := range r.clients {
		if err := c.ConfigResetStat(t.Context()).Err(); err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
	}
	// Heads wake only on a release: no backoff runs out while a hold lasts.
	c := r.client(t, redlock.WithRetry(fixedBackoff(time.Minute)))
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	const goroutines, each = 16, 20
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for range goroutines {
		wg.Go(func() {
			for range each {
				l, err := c.Lock(ctx, "single", 10*time.Second)
				if err != nil {
					errs <- err
					return
				}
				time.Sleep(time.Millisecond) // the work under the lock, as in the benchmark
				if err := l.Unlock(ctx); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	holds := int64(goroutines * each)
	sets := setCalls(t, r)
	attempts := float64(sets) / float64(len(r.clients))
	t.Logf("%d holds, %.0f attempts (%.2f per hold)", holds, attempts, attempts/float64(holds))
	// Measured: about 1.05 attempts per hold, up to 1.35 when the start's
	// race leaves refusals that make newcomers courteous (courtesy), and
	// once 1.51 in ten runs under -race on a loaded machine; 2 when the
	// nodes' announcements of this process's releases wake the heads. The
	// bound sits between.
	if attempts > 1.75*float64(holds) {
		t.Errorf("%.0f attempts for %d holds: heads ask while the key is held", attempts, holds)
	}
}
