package redlock

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/clock"
	"github.com/fencedlock/fencedlock/internal/redistest"
)

// afterAcquire is a go-redis hook that, once armed, runs f once after a
// node applied an acquire script (its reply read, not yet handed back to
// the attempt): a moment between two steps of a real server that a test
// cannot otherwise pick.
type afterAcquire struct {
	mu    sync.Mutex
	armed bool
	f     func()
}

func (h *afterAcquire) arm(f func()) {
	h.mu.Lock()
	h.armed, h.f = true, f
	h.mu.Unlock()
}

func (h *afterAcquire) fire(cmds ...redis.Cmder) {
	if !slices.ContainsFunc(cmds, func(c redis.Cmder) bool {
		a := c.Args()
		return len(a) > 1 && (a[1] == acquireScript.Hash() || a[1] == acquireLua) && c.Err() == nil
	}) {
		return
	}
	h.mu.Lock()
	f := h.f
	if !h.armed {
		f = nil
	}
	h.armed, h.f = false, nil
	h.mu.Unlock()
	if f != nil {
		f()
	}
}

func (h *afterAcquire) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *afterAcquire) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.fire(cmd)
		return err
	}
}
func (h *afterAcquire) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		h.fire(cmds...)
		return err
	}
}

// attack4RTT is a PING round trip to the nodes that nine in ten beat.
func attack4RTT(t *testing.T, nodes []redis.UniversalClient) time.Duration {
	t.Helper()
	var rtts []time.Duration
	for _, n := range nodes {
		for range 10 {
			start := time.Now()
			if err := n.Ping(t.Context()).Err(); err != nil {
				t.Fatal(err)
			}
			rtts = append(rtts, time.Since(start))
		}
	}
	slices.Sort(rtts)
	return rtts[len(rtts)*9/10]
}

// The last announcements of a release can come while the head that the
// first ones woke makes its attempt — here the release on node 1 lands
// just after that attempt was refused there, and is announced before the
// attempt ends. With a node down from the start (its subscription never
// confirmed), one announcement is enough to wake the head, and before
// be8a260 this one did: the head asked again and got the key. Since then
// the release is stale (heard from enough nodes before the drain that
// began the attempt), and a stale release wakes the head only "with the
// nodes its last attempt found free" — but those are only known when the
// attempt ends (tried), after the announcement was delivered, and nothing
// looks again then. The key is free on every live node, its release was
// announced on every live node, nothing was lost or forged, and the head
// sleeps its whole backoff (on a fake clock that never moves: for ever).
func TestAttack4StragglerDuringAttemptWakesHead(t *testing.T) {
	procs := redistest.StartN(t, 3)
	var hands, nodes []redis.UniversalClient
	hook := &afterAcquire{}
	for i, p := range procs {
		hand := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1})
		n := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1})
		if i == 1 {
			n.AddHook(hook)
		}
		t.Cleanup(func() { _ = hand.Close(); _ = n.Close() })
		hands, nodes = append(hands, hand), append(nodes, n)
	}
	rtt := attack4RTT(t, hands)
	const key = "straddle"
	channel := releaseChannel(key)
	// The holder's value: another process's, older than the head's (its
	// caller began to wait earlier), so it wins the tie of one node each.
	const holder = "00000000-0000-7000-8000-00000badcafe"
	for _, h := range hands[:2] {
		if err := h.Set(t.Context(), key, holder, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := procs[2].Kill(); err != nil { // down from the start
		t.Fatal(err)
	}
	fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c, err := New(nodes, WithClock(fake), WithRetry(attack4Fixed(time.Minute)),
		WithNodeTimeout(max(250*time.Millisecond, 100*rtt)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	got := make(chan error, 1)
	go func() {
		l, err := c.Lock(ctx, key, 10*time.Second)
		if err == nil {
			err = l.Unlock(context.WithoutCancel(ctx))
		}
		got <- err
	}()
	if err := fake.BlockUntilContext(ctx, 1); err != nil { // refused, asleep
		t.Fatal(err)
	}
	c.waiters.mu.Lock()
	q := c.waiters.queues[key]
	subbed := q.nsubbed
	c.waiters.mu.Unlock()
	if subbed != 2 {
		t.Fatalf("%d subscriptions confirmed, want the 2 live nodes'", subbed)
	}

	// The holder's release lands on node 0 first; on node 1 just after the
	// head's attempt (woken by node 0's announcement) was refused there,
	// and it is announced to the head before that attempt ends.
	straggled := make(chan struct{})
	hook.arm(func() {
		defer close(straggled)
		if err := hands[1].Del(ctx, key).Err(); err != nil {
			t.Error(err)
			return
		}
		if err := hands[1].Publish(ctx, channel, holder).Err(); err != nil {
			t.Error(err)
			return
		}
		for { // until the head's subscriber delivered it (bounded by ctx)
			c.waiters.mu.Lock()
			heard := q.heard[1]
			c.waiters.mu.Unlock()
			if heard || ctx.Err() != nil {
				return
			}
			time.Sleep(time.Millisecond) // polling a condition, bounded by ctx
		}
	})
	if err := hands[0].Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	if err := hands[0].Publish(ctx, channel, holder).Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-straggled:
	case err := <-got:
		t.Fatalf("the head got the lock before the release reached node 1: %v", err)
	case <-ctx.Done():
		t.Fatal("the head never asked node 1 after node 0's release")
	}
	// The key is free on both live nodes now, and both announced it. The
	// head should ask again within a few round trips; give it hundreds.
	bound := max(3*time.Second, 500*rtt)
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(bound):
		c.waiters.mu.Lock()
		t.Errorf("the head sleeps on %v after the release was announced on every live node, the key free on both: "+
			"heard %d, free %d, enough %d, quorum %d",
			bound, q.nheard, q.free, c.waiters.enough(q), c.quorum)
		c.waiters.mu.Unlock()
		cancel()
		<-got
	}
}

// attack4Fixed always waits d.
type attack4Fixed time.Duration

func (f attack4Fixed) Backoff(int) (time.Duration, bool) { return time.Duration(f), true }

// The same lost wake-up on healthy nodes (all three up and subscribed):
// the holder's release lands on nodes 0 and 1, which wakes the head; a
// contender woken by it too takes node 1 first, and the release on node 2
// lands just after the head's attempt was refused there, announced before
// that attempt ends. The head lost the tie (the holder's value and the
// contender's are older), and the contender steps back silently, as a
// failed attempt does (release.lua). Now the key is free on every node,
// every node announced the holder's release, and the head's last attempt
// was granted by node 0: a quorum free by what the head knows — but the
// nodes it found free are only counted at delivery, not when the attempt
// ends, and the head sleeps its whole backoff (on a fake clock that never
// moves: for ever). (The contender, whose own attempt straddled the same
// announcement, sleeps too: nobody asks.)
func TestAttack4StragglerDuringSplitAttemptWakesHead(t *testing.T) {
	procs := redistest.StartN(t, 3)
	var hands, nodes []redis.UniversalClient
	hook := &afterAcquire{}
	for i, p := range procs {
		hand := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1})
		n := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1})
		if i == 2 {
			n.AddHook(hook)
		}
		t.Cleanup(func() { _ = hand.Close(); _ = n.Close() })
		hands, nodes = append(hands, hand), append(nodes, n)
	}
	rtt := attack4RTT(t, hands)
	const key = "straddle-split"
	channel := releaseChannel(key)
	const (
		holder    = "00000000-0000-7000-8000-00000badcafe"
		contender = "00000000-0000-7000-8000-000000c0ffee"
	)
	for _, h := range hands {
		if err := h.Set(t.Context(), key, holder, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c, err := New(nodes, WithClock(fake), WithRetry(attack4Fixed(time.Minute)),
		WithNodeTimeout(max(250*time.Millisecond, 100*rtt)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	got := make(chan error, 1)
	go func() {
		l, err := c.Lock(ctx, key, 10*time.Second)
		if err == nil {
			err = l.Unlock(context.WithoutCancel(ctx))
		}
		got <- err
	}()
	if err := fake.BlockUntilContext(ctx, 1); err != nil { // refused, asleep
		t.Fatal(err)
	}
	c.waiters.mu.Lock()
	q := c.waiters.queues[key]
	subbed := q.nsubbed
	c.waiters.mu.Unlock()
	if subbed != 3 {
		t.Fatalf("%d subscriptions confirmed, want 3", subbed)
	}
	straggled := make(chan struct{})
	hook.arm(func() {
		defer close(straggled)
		if err := hands[2].Del(ctx, key).Err(); err != nil {
			t.Error(err)
			return
		}
		if err := hands[2].Publish(ctx, channel, holder).Err(); err != nil {
			t.Error(err)
			return
		}
		for { // until the head's subscriber delivered it (bounded by ctx)
			c.waiters.mu.Lock()
			heard := q.heard[2]
			c.waiters.mu.Unlock()
			if heard || ctx.Err() != nil {
				break
			}
			time.Sleep(time.Millisecond) // polling a condition, bounded by ctx
		}
		// The contender lost too: it steps back, unannounced.
		if err := hands[1].Del(ctx, key).Err(); err != nil {
			t.Error(err)
		}
	})
	if err := hands[0].Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	if err := hands[1].Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	if err := hands[1].Set(ctx, key, contender, 10*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	for _, h := range hands[:2] {
		if err := h.Publish(ctx, channel, holder).Err(); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-straggled:
	case err := <-got:
		t.Fatalf("the head got the lock before the release reached node 2: %v", err)
	case <-ctx.Done():
		t.Fatal("the head never asked node 2 after the release on nodes 0 and 1")
	}
	bound := max(3*time.Second, 500*rtt)
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(bound):
		c.waiters.mu.Lock()
		t.Errorf("the head sleeps on %v after the release was announced on every node, the key free on every node: "+
			"heard %d, free %d, enough %d, quorum %d",
			bound, q.nheard, q.free, c.waiters.enough(q), c.quorum)
		c.waiters.mu.Unlock()
		cancel()
		<-got
	}
}
