package redlock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/internal/redistest"
	"github.com/fencedlock/fencedlock/redlock"
)

// A process whose holds last a few hundred milliseconds hands the key on
// to its own waiters without bound while another process waits with a
// backoff of a few seconds: claim stops handing on after maxPasses only
// while the other process was seen within sharedFor (1s), and a sleeping
// head announces itself only when it goes to sleep. Transfers announce
// nothing, so the other head is not woken either, and sleeps out its whole
// backoff while process A holds the key a dozen times in a row.
//
// A: two goroutines looping Lock, hold 400ms, Unlock. B: one goroutine
// Lock (fixed backoff 6s), started once A holds the key. Counted: A's
// holds in a row after that one, before B's. Measured: 14 to 16 (bound 8);
// with sharedFor raised to 10s, the runs were 4.
func TestAttack3HandOnBoundedWhileOtherProcessSleeps(t *testing.T) {
	r := newRig(t, 3)
	rtt := redistest.PingRTT(t, r.clients)
	nodeTimeout := max(50*time.Millisecond, 20*rtt)
	cs := separateClients(t, r, 2, nodeTimeout)
	a, b := cs[0], cs[1]
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Second)
	defer cancel()
	const (
		key     = "attack3-fair"
		ttl     = 30 * time.Second // longer than B's backoff: the holder's TTL does not cut its sleep
		aHold   = 400 * time.Millisecond
		bBackof = 6 * time.Second
		bound   = 2 * (3 + 1) // two cohorts of 1+maxPasses holds
	)
	var (
		mu    sync.Mutex
		order []byte
		wg    sync.WaitGroup
	)
	aHolds := make(chan struct{}) // closed at A's first hold: B comes after
	var aOnce sync.Once
	record := func(who byte) int {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, who)
		n := 0
		for _, w := range order {
			if w == who {
				n++
			}
		}
		return n
	}
	for range 2 {
		wg.Go(func() {
			for ctx.Err() == nil {
				l, err := a.Lock(ctx, key, ttl)
				if err != nil {
					continue
				}
				record('A')
				aOnce.Do(func() { close(aHolds) })
				select {
				case <-time.After(aHold): // the critical section
				case <-ctx.Done():
				}
				_ = l.Unlock(context.WithoutCancel(ctx))
			}
		})
	}
	wg.Go(func() {
		select {
		case <-aHolds:
		case <-ctx.Done():
		}
		for ctx.Err() == nil {
			l, err := b.Lock(ctx, key, ttl, redlock.WithLockRetry(fixedBackoff(bBackof)))
			if err != nil {
				continue
			}
			n := record('B')
			time.Sleep(time.Millisecond) // the critical section
			_ = l.Unlock(context.WithoutCancel(ctx))
			if n == 1 {
				cancel()
			}
		}
	})
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	t.Logf("order: %s", order)
	first := -1
	for i, w := range order {
		if w == 'B' {
			first = i
			break
		}
	}
	if first < 0 {
		t.Fatalf("B never got the key in %d holds of A", len(order))
	}
	run := first - 1 // A's holds after the one that let B start
	if run > bound {
		t.Errorf("A held the key %d times in a row while B waited (bound %d)", run, bound)
	}
}
