package redlock_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/clock"
	"github.com/fencedlock/fencedlock/redlock"
)

// oddPayloads are messages a release channel may carry that the acquire
// and release scripts never publish: a bare "+" or "?", nothing, values
// without a client id, another library's chatter. (A forged grant, "+"
// and a value, is tried apart.)
var oddPayloads = []string{
	"", "+", "?", "?+", "x", "?x", "released", "?" + strings.Repeat("p", 300), "\x00\xff",
	strings.Repeat("v", 300),
}

// A waiting head that heard odd messages on the release channel still
// wakes and takes the key when the holder's release is announced on every
// node. When the odd messages end with the same forged grant from every
// node, the head may take it for another process's hold and let it pass,
// but no longer than its backoff. (The backoff is on a fake clock that
// moves only when the test says.)
func TestAttack2OddPayloadsThenRelease(t *testing.T) {
	for _, forged := range []bool{false, true} {
		t.Run(fmt.Sprintf("forged grant last %v", forged), func(t *testing.T) {
			r := newRig(t, 3)
			fake := clock.NewFake(epoch)
			w := r.client(t, redlock.WithClock(fake), redlock.WithRetry(fixedBackoff(time.Minute)))
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			const key = "odd"
			channel := "fencedlock:released:" + key
			r.holdByHand(t, key, "holder-of-odd")
			got := make(chan error, 1)
			go func() {
				l, err := w.Lock(ctx, key, 10*time.Second)
				if err == nil {
					err = l.Unlock(ctx)
				}
				got <- err
			}()
			if err := fake.BlockUntilContext(ctx, 1); err != nil {
				t.Fatal(err)
			}
			waitSubscribed(t, r.clients, channel)
			for _, rc := range r.clients {
				for _, p := range oddPayloads {
					if err := rc.Publish(ctx, channel, p).Err(); err != nil {
						t.Fatal(err)
					}
				}
				last := "odd-last-word"
				if forged {
					last = "+forged-grant-1234"
				}
				if err := rc.Publish(ctx, channel, last).Err(); err != nil {
					t.Fatal(err)
				}
			}
			for i := range r.clients {
				r.releaseByHand(t, i, key, "holder-of-odd")
			}
			if forged {
				// Woken, the head lets the "hold" pass and sleeps again
				// (one timer: its backoff); at the backoff it asks.
				for {
					bctx, bcancel := context.WithCancel(ctx)
					asleep := make(chan error, 1)
					go func() { asleep <- fake.BlockUntilContext(bctx, 1) }()
					select {
					case err := <-got:
						bcancel()
						if err != nil {
							t.Fatal(err)
						}
						return
					case err := <-asleep:
						bcancel()
						if err != nil {
							t.Fatal(err)
						}
						fake.Advance(time.Minute)
					}
				}
			}
			select {
			case err := <-got:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the waiter sleeps on though the holder's release was announced on every node after the odd messages")
			}
		})
	}
}

// Several Clients (as separate processes) contend for one key while
// another party floods the release channel with odd messages, forged
// grants and forged releases of the current holder's value: holds never
// overlap, tokens rise strictly from hold to hold, and every Lock succeeds
// within its ctx.
func TestAttack2ContendingClientsUnderForgedMessages(t *testing.T) {
	r := newRig(t, 5)
	const (
		key       = "flooded"
		clients   = 4
		perClient = 3
		holds     = 6 // per goroutine
	)
	channel := "fencedlock:released:" + key
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()

	var (
		inside    atomic.Int32
		mu        sync.Mutex // protects last, overlaps, backwards
		last      uint64
		overlaps  int
		backwards []string
	)
	var workers sync.WaitGroup
	errs := make(chan error, clients*perClient)
	for range clients {
		c := r.client(t)
		for range perClient {
			workers.Go(func() {
				for range holds {
					l, err := c.Lock(ctx, key, 10*time.Second)
					if err != nil {
						errs <- err
						return
					}
					if !inside.CompareAndSwap(0, 1) {
						mu.Lock()
						overlaps++
						mu.Unlock()
					}
					mu.Lock()
					if l.Token() <= last {
						backwards = append(backwards, fmt.Sprintf("%d after %d", l.Token(), last))
					}
					last = max(last, l.Token())
					mu.Unlock()
					inside.Store(0)
					if err := l.Unlock(ctx); err != nil {
						errs <- err
						return
					}
				}
			})
		}
	}
	stop := make(chan struct{})
	var flood sync.WaitGroup
	flood.Go(func() {
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			default:
			}
			rc := r.clients[rand.N(len(r.clients))]
			p := oddPayloads[n%len(oddPayloads)]
			switch n % 5 {
			case 0:
				p = "+forged-grant-" + strconv.Itoa(n%7)
			case 1: // a forged release of whatever holds the key now
				if v, err := rc.Get(ctx, key).Result(); err == nil {
					p = v
				}
			case 2: // a forged grant of it
				if v, err := rc.Get(ctx, key).Result(); err == nil {
					p = "+" + v
				}
			}
			_ = rc.Publish(ctx, channel, p).Err()
		}
	})
	workers.Wait()
	close(stop)
	flood.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("Lock or Unlock: %v", err)
	}
	if overlaps > 0 {
		t.Errorf("%d holds overlapped another", overlaps)
	}
	if len(backwards) > 0 {
		t.Errorf("tokens did not rise: %v", backwards)
	}
	t.Logf("%d holds, last token %d", clients*perClient*holds, last)
}
