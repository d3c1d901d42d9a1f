package redlock_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/clock"
	"github.com/fencedlock/fencedlock/redlock"
)

// A release channel is anyone's to publish on. What a waiter hears there —
// lost, odd or forged — moves only when it asks the nodes: it never keeps
// it from asking past its backoff, and the nodes alone grant the key.

// oddPayloads are messages a release channel may carry that release.lua
// never publishes (it publishes "since id", or "" when nobody waits): the
// grant and presence announcements of earlier versions, numbers without a
// Client, Clients without a number, another library's chatter.
var oddPayloads = []string{
	"+", "?", "x", "released", "+v 60000", "?5555aaaa", "1", "1 ", " 1", "x 1", "1x 55555555",
	"99999999999999999999999 55555555", "\x00\xff", strings.Repeat("v", 300),
}

// A waiter that hears, after its holder's key is gone from every node,
// nothing, odd messages, or every node naming an older waiter that does
// not exist (forged) asks when its backoff ends, and takes the key; odd
// messages followed by the real release announced on every node wake it
// at once. (The backoff is on a fake clock that moves only when the test
// says; the holder's key vanished without a word.)
func TestOddAnnouncementsNeverStallAWaiter(t *testing.T) {
	for _, tc := range []struct {
		name    string
		odd     bool // odd messages on every node
		forged  bool // then every node names an older waiter
		release bool // then the release is announced as release.lua does
	}{
		{name: "a lost release"},
		{name: "odd messages", odd: true},
		{name: "a forged older waiter", forged: true},
		{name: "odd messages and a forged older waiter", odd: true, forged: true},
		{name: "odd messages, then the release", odd: true, release: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, 3)
			fake := clock.NewFake(epoch)
			w := r.client(t, redlock.WithClock(fake), redlock.WithRetry(fixedBackoff(time.Minute)))
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			const key = "odd"
			r.holdByHand(t, key, "holder-of-odd")
			got := asleepOnFake(ctx, t, r, w, fake, key)
			for i := range r.clients {
				if tc.release {
					break // released below, with the announcement
				}
				if err := r.clients[i].Del(ctx, key).Err(); err != nil {
					t.Fatal(err)
				}
			}
			for i := range r.clients {
				if tc.odd {
					for _, p := range oddPayloads {
						r.announce(t, i, key, p)
					}
				}
				if tc.forged {
					r.announce(t, i, key, fmt.Sprintf("%d 00000000", epoch.UnixMilli()-1))
				}
				if tc.release {
					r.releaseByHand(t, i, key)
				}
			}
			if !tc.release {
				if !absent(got, max(100*time.Millisecond, 50*r.rtt)) {
					t.Fatal("the waiter took the key before its backoff, with no release that frees it announced")
				}
				fake.Advance(time.Minute) // its backoff
			}
			select {
			case res := <-got:
				if res.err != nil {
					t.Fatal(res.err)
				}
				_ = res.l.Unlock(ctx)
			case <-time.After(10 * time.Second):
				t.Fatal("the waiter sleeps on though the key is free on every node and its backoff ended or the release was announced")
			}
		})
	}
}

// Several Clients (as separate processes) contend for one key while
// another party floods the release channel with odd messages and forged
// announcements — nobody waits, an older waiter that does not exist, the
// true first waiter read from a node, a younger one — which wake waiters
// at will or keep them asleep: holds never overlap, tokens rise strictly
// from hold to hold, and every Lock succeeds within its ctx.
func TestContendingClientsUnderForgedAnnouncements(t *testing.T) {
	r := newRig(t, 5)
	const (
		key       = "flooded"
		clients   = 4
		perClient = 3
		holds     = 6 // per goroutine
	)
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
	order, _ := waitKeys(key)
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
			case 0: // nobody waits: every head wakes and asks
				p = ""
			case 1: // an older waiter that does not exist: frees nothing
				p = "1 00000000"
			case 2, 3: // the true first waiter there, or one just younger
				if zs, err := rc.ZRangeWithScores(ctx, order, 0, 0).Result(); err == nil && len(zs) > 0 {
					p = fmt.Sprintf("%d %s", int64(zs[0].Score)+int64(n%5-2), zs[0].Member)
				}
			}
			_ = announceTo(ctx, rc, key, p)
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
