package redlock

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/internal/redistest"
)

// Close waits for the calls in flight, such as an abandoned attempt's step
// backs, past its own bound: each ends by its deadline, but on a loaded
// machine the chain of them (an answer, then the release it calls for)
// runs late, and stopping the batchers under a release leaves its grant
// for the whole TTL. Found under load by TestAttackCloseDuringCalls (Close
// gave up on 30 calls in flight; two keys stayed held on every node). A
// count that never ends still cannot hold Close for ever (drainCap).
func TestCloseWaitsForCallsInFlightPastItsBound(t *testing.T) {
	c := bareClient(t, 3)
	c.cfg.nodeTimeout = 10 * time.Millisecond
	bound := c.closeTimeout()

	c.inflight.add(1) // a release that a stalled machine sends late
	closed := make(chan time.Duration, 1)
	start := time.Now()
	go func() {
		_ = c.Close()
		closed <- time.Since(start)
	}()
	select {
	case took := <-closed:
		t.Fatalf("Close returned after %v with a call still in flight (its bound %v)", took, bound)
	case <-time.After(3 * bound): // well past the bound: Close still waits
	}
	c.inflight.done()
	select {
	case <-closed:
	case <-time.After(drainCap * bound * 10):
		t.Fatal("Close did not return once nothing was in flight")
	}

	// A count that never ends: Close gives up at drainCap bounds.
	c2 := bareClient(t, 3)
	c2.cfg.nodeTimeout = c.cfg.nodeTimeout
	c2.inflight.add(1)
	start = time.Now()
	_ = c2.Close()
	if took := time.Since(start); took < drainCap*bound {
		t.Errorf("Close returned after %v with a call in flight; want it to wait %v", took, drainCap*bound)
	}
}

// An attempt in flight when Close begins gives up at once, with
// ErrNotAcquired and the client closed, rather than wait for its answers:
// Close waits for what it owes (see TestCloseWaitsForCallsInFlightPastItsBound),
// and an attempt that goes on asks, re-asks and steps back the while.
func TestAttemptInFlightGivesUpWhenCloseBegins(t *testing.T) {
	var (
		armed   atomic.Bool
		arrived = make(chan struct{}, 3)
		unblock = make(chan struct{})
	)
	_, c := hookedClient(t, func(_ int, cmds ...redis.Cmder) {
		if armed.Load() && slices.ContainsFunc(cmds, func(c redis.Cmder) bool {
			a := c.Args()
			return len(a) > 1 && a[1] == acquireScript.Hash()
		}) {
			select { // the test reads the first; any more wait for unblock
			case arrived <- struct{}{}:
			case <-unblock:
			}
			<-unblock // the answer is held: the attempt waits for it
		}
	})
	l, err := c.TryLock(t.Context(), "warm-up", time.Minute) // the scripts loaded
	if err != nil {
		t.Fatalf("setup: %v", err)
	}
	if err := l.Unlock(t.Context()); err != nil {
		t.Fatalf("setup: %v", err)
	}
	armed.Store(true)
	closed := make(chan struct{})
	t.Cleanup(func() { // first: the held answers go, then Close can end
		close(unblock)
		<-closed
	})

	got := make(chan error, 1)
	go func() {
		l, err := c.TryLock(context.Background(), "k", time.Minute)
		if l != nil {
			err = errors.New("acquired")
		}
		got <- err
	}()
	<-arrived // a node applied the acquire; its answer is held
	go func() {
		_ = c.Close()
		close(closed)
	}()
	err = <-got
	if !errors.Is(err, ErrNotAcquired) || !errors.Is(err, errClosed) {
		t.Fatalf("TryLock in flight when Close began: %v; want ErrNotAcquired, the client closed", err)
	}
}

// A release that waited in its node's queue past its deadline still goes
// to the node (late, as a slow node's would): skipped, it left its grant
// for the whole TTL. A busy machine holds a queue that long: found under
// load by TestAttackCloseDuringCalls, an abandoned attempt's step back to
// node 0 timed out unsent and the key stayed held there. Here node 0's
// worker is held by another key's call (same queue) while an Unlock's
// release to node 0 waits behind it and times out; then, or after Close
// stopped the batchers, the worker moves on.
func TestReleaseTimedOutInTheQueueStillReachesTheNode(t *testing.T) {
	for _, closing := range []bool{false, true} {
		t.Run(fmt.Sprint("close=", closing), func(t *testing.T) { queuedRelease(t, closing) })
	}
}

func queuedRelease(t *testing.T, closing bool) {
	const key = "queued-release"
	var (
		armed   atomic.Bool
		blocker string // a key whose calls go through key's queue
		arrived = make(chan struct{}, 1)
		unblock = make(chan struct{})
	)
	nodes, c := hookedClient(t, func(i int, cmds ...redis.Cmder) {
		if i == 0 && armed.Load() && slices.ContainsFunc(cmds, func(c redis.Cmder) bool {
			return slices.Contains(c.Args(), any(blocker))
		}) {
			armed.Store(false)
			arrived <- struct{}{}
			<-unblock // node 0's worker for key's queue waits here
		}
	})
	b := c.batchers[0]
	blocker = b.sameQueueKey(key)
	ctx := t.Context()
	l, err := c.TryLock(ctx, key, time.Minute)
	if err != nil {
		t.Fatalf("setup: %v", err)
	}
	c.inflight.wait(nil) // every node granted, node 0 too
	if v := nodes[0].Get(ctx, key).Val(); v != l.Value() {
		t.Fatalf("setup: node 0 holds %q, want %q", v, l.Value())
	}

	armed.Store(true)
	blocked := make(chan *Lock, 1)
	go func() {
		bl, _ := c.TryLock(context.Background(), blocker, time.Minute) // nodes 1 and 2 grant it
		blocked <- bl
	}()
	<-arrived
	if err := l.Unlock(ctx); err != nil { // nodes 1 and 2 release; node 0's waits in the queue
		t.Fatalf("unlock: %v", err)
	}
	c.inflight.wait(nil) // node 0's release timed out in the queue
	closed := make(chan struct{})
	if closing {
		go func() {
			_ = c.Close() // gives up on the blocked worker at its bound
			close(closed)
		}()
		<-closed
	}
	close(unblock)
	deadline := time.Now().Add(100 * c.cfg.nodeTimeout)
	for nodes[0].Get(ctx, key).Val() != "" {
		if time.Now().After(deadline) {
			t.Fatalf("node 0 still holds the released hold %v after its queue moved on", 100*c.cfg.nodeTimeout)
		}
		time.Sleep(time.Millisecond) // polling the node, bounded by deadline
	}
	if bl := <-blocked; bl != nil && !closing {
		_ = bl.Unlock(ctx)
	}
}

// With the largest node timeout (TestAttackExtremeDurations uses it), Close's
// cap on its wait for the calls in flight overflowed into a negative
// duration: it gave up at once, and stopped the batchers under the releases
// it waits for (attack 7).
func TestCloseDrainTimeoutDoesNotOverflow(t *testing.T) {
	c := bareClient(t, 3)
	c.cfg.nodeTimeout = math.MaxInt64
	if d := c.drainTimeout(); d <= c.closeTimeout() {
		t.Errorf("drainTimeout %v with node timeout %v; want at least closeTimeout %v", d, c.cfg.nodeTimeout, c.closeTimeout())
	}
	c.inflight.add(1) // a release still to be queued
	closed := make(chan struct{})
	go func() { _ = c.Close(); close(closed) }()
	select {
	case <-closed:
		t.Error("Close returned with a call in flight")
	case <-time.After(100 * time.Millisecond): // an observation window: Close still waits
	}
	c.inflight.done()
	<-closed
}

// hookedClient is a Client on 3 fresh nodes, with a node timeout of a
// hundred measured round trips (at least 50 ms); hook runs after each reply
// of node i (a redistest.AfterReply hook).
func hookedClient(t *testing.T, hook func(i int, cmds ...redis.Cmder)) ([]redis.UniversalClient, *Client) {
	t.Helper()
	var nodes []redis.UniversalClient
	for i, p := range redistest.StartN(t, 3) {
		n := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1})
		n.AddHook(redistest.AfterReply(func(cmds ...redis.Cmder) { hook(i, cmds...) }))
		t.Cleanup(func() { _ = n.Close() })
		nodes = append(nodes, n)
	}
	rtt := redistest.PingRTT(t, nodes)
	c, err := New(nodes, WithNodeTimeout(max(100*rtt, 50*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return nodes, c
}

// A release asked for after Close stopped the batchers (a late grant's step
// back, read by a worker during Close, or an Unlock after Close) still
// reaches its node: refused, its grant stayed for the whole TTL (attack 8).
func TestReleaseAfterCloseStillReachesTheNode(t *testing.T) {
	nodes, c := hookedClient(t, func(int, ...redis.Cmder) {})
	ctx := t.Context()
	l, err := c.TryLock(ctx, "after-close", time.Minute)
	if err != nil {
		t.Fatalf("setup: %v", err)
	}
	c.inflight.wait(nil) // every node granted
	_ = c.Close()
	got := make(resultSink, 1)
	c.newGroup(got, c.cfg.nodeTimeout, []int{0}, releaseScript, l.a.releaseKeys(), l.a.releaseArgs(true)...).start()
	if r := <-got; r.err != nil || !isYes(r.v) {
		t.Fatalf("release on node 0 after Close: %v, %v; want it to delete the hold", r.v, r.err)
	}
	if v := nodes[0].Get(ctx, "after-close").Val(); v != "" {
		t.Errorf("node 0 holds %q after the release", v)
	}
}

// Close waits for the workers to send the releases still queued when it
// stops the batchers, also when its wait for the calls in flight ran past
// its bound: stop used the bound from Close's start, by then passed, and
// Close returned while a worker still had a release to send (attack 8).
func TestCloseWaitsForTheQueuedReleasesItStops(t *testing.T) {
	const key = "close-queued"
	var (
		armed   atomic.Bool
		blocker string
		arrived = make(chan struct{}, 1)
		quit    = make(chan struct{}) // set to node 0's batcher's quit below
	)
	nodes, c := hookedClient(t, func(i int, cmds ...redis.Cmder) {
		if i == 0 && armed.Load() && slices.ContainsFunc(cmds, func(c redis.Cmder) bool {
			return slices.Contains(c.Args(), any(blocker))
		}) {
			armed.Store(false)
			arrived <- struct{}{}
			<-quit // the worker goes on once Close stops the batchers
		}
	})
	b := c.batchers[0]
	quit = b.quit
	blocker = b.sameQueueKey(key)
	ctx := t.Context()
	l, err := c.TryLock(ctx, key, time.Minute)
	if err != nil {
		t.Fatalf("setup: %v", err)
	}
	c.inflight.wait(nil)
	armed.Store(true)
	go func() { _, _ = c.TryLock(context.Background(), blocker, time.Minute) }()
	<-arrived
	if err := l.Unlock(ctx); err != nil { // node 0's release waits behind the blocker
		t.Fatalf("unlock: %v", err)
	}
	c.inflight.wait(nil) // it timed out in the queue
	c.inflight.add(1)    // a call Close waits for past its bound
	closed := make(chan struct{})
	go func() {
		_ = c.Close()
		close(closed)
	}()
	select {
	case <-closed:
		t.Fatal("Close returned with a call in flight")
	case <-time.After(2 * c.closeTimeout()): // past Close's first bound
	}
	c.inflight.done()
	<-closed
	if v := nodes[0].Get(ctx, key).Val(); v != "" {
		t.Errorf("node 0 holds %q when Close returned; want the queued release sent by then", v)
	}
}

// frozenClient is a Client on 3 fresh nodes whose clients wait for a
// frozen node as long as go-redis lets them (ReadTimeout a minute, no
// ContextTimeoutEnabled, a large pool), with a node timeout of a hundred
// measured round trips; freeze pauses node 2 until the test ends.
func frozenClient(t *testing.T) (nodes []redis.UniversalClient, c *Client, nt time.Duration, freeze func()) {
	t.Helper()
	procs := redistest.StartN(t, 3)
	for _, p := range procs {
		n := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, ReadTimeout: time.Minute, PoolSize: 1000})
		t.Cleanup(func() { _ = n.Close() })
		nodes = append(nodes, n)
	}
	nt = max(100*redistest.PingRTT(t, nodes), 50*time.Millisecond)
	c, err := New(nodes, WithNodeTimeout(nt))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	freeze = func() {
		if err := procs[2].Pause(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = procs[2].Resume() })
	}
	return nodes, c, nt, freeze
}

// With a node frozen under a failed attempt's call, Close waits for the
// step back owed to it (its deadline) but not a whole bound more for the
// worker the frozen call holds: it took 4 node timeouts (attack 9, 10/10).
func TestCloseAfterAFailedAttemptOnAFrozenNode(t *testing.T) {
	nodes, c, nt, freeze := frozenClient(t)
	ctx := t.Context()
	warm, err := c.TryLock(ctx, "warm", time.Minute)
	if err != nil {
		t.Fatalf("setup: %v", err)
	}
	if err := warm.Unlock(ctx); err != nil {
		t.Fatalf("setup: %v", err)
	}
	for _, n := range nodes[:2] {
		if err := n.Set(ctx, "x", "someone's", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	freeze()
	if _, err := c.TryLock(ctx, "x", time.Minute); err == nil {
		t.Fatal("setup: acquired a key held on a quorum")
	}
	start := time.Now()
	_ = c.Close()
	took := time.Since(start)
	t.Logf("Close took %.2f node timeouts", float64(took)/float64(nt))
	if took > 7*nt/2 { // about two and a half; it was four
		t.Errorf("Close took %v = %.1f node timeouts of %v with a node frozen; documented: about two",
			took, float64(took)/float64(nt), nt)
	}
}

// Releases asked for after Close go on goroutines of their own, at most
// workersPerNode per node at once: with a node frozen, each would sit in
// go-redis until its ReadTimeout, one per Unlock (attack 9: 199 of 200).
func TestReleasesAfterCloseUseBoundedGoroutines(t *testing.T) {
	nodes, c, _, freeze := frozenClient(t)
	var locks []*Lock
	for i := range 200 {
		// Lock, not TryLock: the set-up's first calls dial and load the
		// scripts, and a node timeout then (seen under load) is no part of
		// what is tested.
		l, err := c.Lock(t.Context(), fmt.Sprint("g-", i), time.Minute)
		if err != nil {
			t.Fatalf("setup: %v", err)
		}
		locks = append(locks, l)
	}
	c.inflight.wait(nil)
	// What is tested is the releases stuck on node 2: the holds must be
	// there (a Lock that met a node timeout there took nodes 0 and 1 alone).
	held, err := nodes[2].Keys(t.Context(), "g-*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(held) < len(locks)/2 {
		t.Fatalf("set-up: %d of %d holds on the node to be frozen: the test would show nothing", len(held), len(locks))
	}
	freeze()
	_ = c.Close()
	before := runtime.NumGoroutine()
	for _, l := range locks {
		_ = l.Unlock(t.Context()) // nodes 0 and 1 answer; node 2's release is stuck
	}
	if d := runtime.NumGoroutine() - before; d > len(c.nodes)*workersPerNode+8 {
		t.Errorf("%d goroutines more after 200 Unlocks after Close with a node frozen; want at most about %d", d, len(c.nodes)*workersPerNode)
	}
}

// sameQueueKey is a key whose calls to b's node go through key's queue: a
// call of it that a test holds blocks the calls of key queued behind.
func (b *batcher) sameQueueKey(key string) string {
	for i := 0; ; i++ {
		if k := fmt.Sprint("blocker-", i); b.queue(&op{keys: []string{k}}) == b.queue(&op{keys: []string{key}}) {
			return k
		}
	}
}
