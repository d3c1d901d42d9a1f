package redlock

import (
	"fmt"
	"testing"
	"time"
)

// A head's spread is a random share of about one round trip to a quorum
// per contending process: never negative, never more than that, whatever
// the round trip (a distant or loaded node's) and however many processes
// contend — the product of the two must not overflow.
func TestAttack2SpreadStaysInRange(t *testing.T) {
	for _, tc := range []struct {
		rtt   time.Duration
		peers int
	}{
		{500 * time.Microsecond, 1},
		{5 * time.Millisecond, 255},
		{50 * time.Millisecond, 40},
		{200 * time.Millisecond, 255},
	} {
		t.Run(fmt.Sprintf("rtt %v, %d peers", tc.rtt, tc.peers), func(t *testing.T) {
			c := &Client{nodes: make([]node, 3), quorum: 2, closing: make(chan struct{})}
			c.rtt.Store(int64(tc.rtt))
			w := newWaitQueues(c)
			q, _ := w.join("k")
			now := time.Now()
			w.mu.Lock()
			q.shared = now
			for i := range tc.peers {
				q.peers[fmt.Sprintf("%08d", i)] = now
			}
			w.mu.Unlock()
			limit := time.Duration(1+tc.peers) * tc.rtt
			var sum time.Duration
			const n = 2000
			for range n {
				d := w.spread(q, time.Now()) // a newcomer: the full spread
				if d < 0 || d > limit {
					t.Fatalf("spread %v, want within [0, %v]", d, limit)
				}
				sum += d / n
			}
			// Uniform over [0, limit): the mean is near limit/2.
			if mean := sum; mean < limit/3 || mean > 2*limit/3 {
				t.Errorf("mean spread %v, want about %v", mean, limit/2)
			}
		})
	}
}

// The spread rests on messages anyone can publish (how many processes
// announced that they wait): forged by the hundred, they must not hold a
// woken head past what was left of its sleep, its backoff.
func TestAttack2SpreadEndsWithTheBackoff(t *testing.T) {
	c := &Client{nodes: make([]node, 3), quorum: 2, closing: make(chan struct{}), cfg: defaultConfig()}
	c.rtt.Store(int64(50 * time.Millisecond))
	c.waiters = newWaitQueues(c)
	q, _ := c.waiters.join("k")
	now := time.Now()
	c.waiters.mu.Lock()
	q.shared = now
	for i := range maxPeers - 1 { // a spread of up to 12.8s
		q.peers[fmt.Sprintf("%08d", i)] = now
	}
	c.waiters.mu.Unlock()
	const left = 20 * time.Millisecond
	for range 5 {
		start := time.Now()
		if _, err := c.stagger(t.Context(), q, nil, time.Now(), time.Minute, left); err != nil {
			t.Fatal(err)
		}
		// A loaded machine may run the timer late, never by seconds.
		if took := time.Since(start); took > time.Second {
			t.Fatalf("a head staggered %v with %v left of its backoff", took, left)
		}
	}
}
