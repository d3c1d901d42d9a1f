package redlock_test

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/clock"
	"github.com/fencedlock/fencedlock/internal/redistest"
	"github.com/fencedlock/fencedlock/redlock"
	"github.com/fencedlock/fencedlock/redlocktest"
)

// Attacks on WithReacquireOnExtend: its rules R1–R5 (docs/protocol.md,
// "Extensions that re-create") under delays, pauses, restarts and races.

var (
	//go:embed scripts/counter.lua
	counterSource string
	//go:embed scripts/reacquire.lua
	reacquireSource string
	//go:embed scripts/extend.lua
	extendSource string
)

// isExtension matches a call of the reacquire or the extend script, by its
// digest or its source.
func isExtension(cmd redis.Cmder) bool {
	args := cmd.Args()
	if len(args) < 2 {
		return false
	}
	for _, src := range []string{counterSource + reacquireSource, extendSource} {
		switch cmd.Name() {
		case "evalsha":
			if args[1] == redis.NewScript(src).Hash() {
				return true
			}
		case "eval":
			if args[1] == src {
				return true
			}
		}
	}
	return false
}

// delayGate is a go-redis hook that holds back the calls of an extension
// (the reacquire or the extend script), before they are written, while armed: a request that the network
// delays, which no proxy can pick out of a connection. Each node's client
// gets its own hook, which holds back its node's first such call.
type delayGate struct {
	mu      sync.Mutex
	armed   map[int]bool  // node → hold back its next reacquire call
	held    int           // calls held now
	heldC   chan struct{} // a send per call held
	release chan struct{} // closed to let the held calls go
}

func newDelayGate() *delayGate {
	return &delayGate{armed: map[int]bool{}, heldC: make(chan struct{}, 16), release: make(chan struct{})}
}

// arm holds back the next extension call to each of nodes.
func (g *delayGate) arm(nodes ...int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, i := range nodes {
		g.armed[i] = true
	}
}

// waitHeld waits until n calls are held back.
func (g *delayGate) waitHeld(t *testing.T, n int) {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for range n {
		select {
		case <-g.heldC:
		case <-deadline.C:
			t.Fatalf("fewer than %d extension calls were sent in 10s", n)
		}
	}
}

// letGo sends the calls held back.
func (g *delayGate) letGo() { close(g.release) }

// take reports whether cmd, to node, is to be held back (and disarms it).
func (g *delayGate) take(node int, cmd redis.Cmder) bool {
	if !isExtension(cmd) {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.armed[node] {
		return false
	}
	g.armed[node] = false
	g.held++
	return true
}

func (g *delayGate) wait() {
	g.heldC <- struct{}{}
	<-g.release
}

type gateHook struct {
	g    *delayGate
	node int
}

func (gateHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h gateHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.g.take(h.node, cmd) {
			h.g.wait()
		}
		return next(ctx, cmd)
	}
}

func (h gateHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if h.g.take(h.node, cmd) {
				h.g.wait()
				break
			}
		}
		return next(ctx, cmds)
	}
}

// gatedClients are clients of their own for nodes (through their proxies),
// with the options the lock advises, each behind g, with the extension
// scripts already loaded (so that the first call is the EVALSHA the gate
// holds, not a NOSCRIPT answer).
func gatedClients(t *testing.T, nodes redlocktest.NodeSet, g *delayGate) []redis.UniversalClient {
	t.Helper()
	cs := make([]redis.UniversalClient, len(nodes))
	for i, n := range nodes {
		c := redis.NewClient(&redis.Options{Addr: n.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
		t.Cleanup(func() { _ = c.Close() })
		for _, src := range []string{counterSource + reacquireSource, extendSource} {
			if err := redis.NewScript(src).Load(t.Context(), c).Err(); err != nil {
				t.Fatal(err)
			}
		}
		c.AddHook(gateHook{g: g, node: i})
		cs[i] = c
	}
	return cs
}

// TestReacquireLandingAfterTheValidityDoesNotResurrect: an Extend is sent
// with a millisecond of validity left, and its calls are delayed on their
// way. Meanwhile the validity runs out on the holder's own clock, the keys
// expire (after Until, as assumption T has it), and another hold takes the
// key and releases it. Then the extension's calls land, on every node. The
// hold was over before any of them ran: R3's purpose is that a holder never
// comes to believe it still holds the lock after its validity ran out
// (docs/protocol.md: such a key "belongs to a hold that is over"), so the
// Extend must not succeed. Without the option it does not (its PEXPIREs
// find nothing); with it, the re-creates count. Done is not watched, as a
// caller that only calls Extend does not.
func TestReacquireLandingAfterTheValidityDoesNotResurrect(t *testing.T) {
	for _, tc := range []struct {
		name      string
		reacquire bool
	}{{"with the option", true}, {"without it", false}} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := redlocktest.Nodes(t, 3)
			ctx := t.Context()
			clk := clock.NewFake(time.Unix(1_700_000_000, 0))
			gate := newDelayGate()
			// The node timeout covers the delay the test makes (a few local
			// round trips), with the margin of a loaded machine.
			nodeTimeout := max(2*time.Second, 1000*redistest.PingRTT(t, nodes.Clients()))
			opts := []redlock.Option{redlock.WithClock(clk), redlock.WithNodeTimeout(nodeTimeout)}
			if tc.reacquire {
				opts = append(opts, redlock.WithReacquireOnExtend())
			}
			a, err := redlock.New(gatedClients(t, nodes, gate), opts...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = a.Close() })
			b := reacquireClient(t, nodes, false, redlock.WithClock(clk))
			const key = "resurrect"
			l, err := a.TryLock(ctx, key, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			clk.Advance(l.Until().Sub(clk.Now()) - time.Millisecond) // a millisecond left
			gate.arm(0, 1, 2)
			errc := make(chan error, 1)
			go func() { errc <- l.Extend(context.WithoutCancel(ctx), time.Minute) }()
			gate.waitHeld(t, 3) // sent within the validity, on their way
			clk.Advance(2 * time.Millisecond)
			if l.TTL() > 0 {
				t.Fatalf("TTL %v: the validity should be over", l.TTL())
			}
			for i := range nodes { // the keys expire, after Until
				if err := nodes[i].Client().Del(ctx, key).Err(); err != nil {
					t.Fatal(err)
				}
			}
			lb, err := b.TryLock(ctx, key, time.Minute)
			if err != nil {
				t.Fatalf("another client's TryLock after the hold's validity and keys ran out: %v", err)
			}
			if err := lb.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			gate.letGo()
			err = <-errc
			if err == nil {
				t.Errorf("Extend returned nil with TTL %v: a hold whose validity ran out (and whose key another hold, token %d > %d, "+
					"took and released since) came back to life; want ErrLockLost", l.TTL(), lb.Token(), l.Token())
			} else if !errors.Is(err, redlock.ErrLockLost) {
				t.Errorf("Extend: %v, want ErrLockLost", err)
			}
			_ = l.Unlock(ctx)
		})
	}
}

// TestReacquireToAPausedNodeIsReleasedAfterUnlock: a node that lost the key
// is frozen when an Extend is sent: its re-create waits in the node's
// socket, the call times out (the connection is dropped), and the Extend
// succeeds on the other two. Unlock goes to every node (R5) and decides on
// the two. When the node resumes, the re-create runs — after the Unlock returned —
// and the release owed to that node must still remove it (Claim 4), not
// leave it for the TTL.
func TestReacquireToAPausedNodeIsReleasedAfterUnlock(t *testing.T) {
	nodes := redlocktest.Nodes(t, 3)
	nodeTimeout := max(250*time.Millisecond, 100*redistest.PingRTT(t, nodes.Clients()))
	c, a := observedClient(t, nodes, redlock.WithNodeTimeout(nodeTimeout))
	ctx := t.Context()
	const key = "paused-recreate"
	l := tryLockAll(t, c, a, key, time.Minute)
	forget(t, nodes, 0)
	// Loaded, so that the frozen node's first call is the re-create itself,
	// not an EVALSHA that a NOSCRIPT answer would have to follow.
	if err := redis.NewScript(counterSource+reacquireSource).Load(ctx, nodes[0].Client()).Err(); err != nil {
		t.Fatal(err)
	}
	if err := nodes[0].Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = nodes[0].Resume()
		}
	}()
	start := time.Now()
	if err := l.Extend(ctx, time.Minute); err != nil {
		t.Errorf("Extend with one node frozen: %v", err)
	}
	uctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := l.Unlock(uctx); err != nil {
		t.Errorf("Unlock with two of three nodes up: %v", err)
	}
	if took := time.Since(start); took > 9*time.Second {
		t.Errorf("Extend and Unlock took %v with one node frozen", took)
	}
	// The calls to the frozen node give up at their node timeout, and
	// their connections go with them.
	time.Sleep(2 * nodeTimeout)
	if err := nodes[0].Resume(); err != nil {
		t.Fatal(err)
	}
	resumed = true
	// The re-create runs when the node resumes (its heal of the counter
	// stays after the key goes); then the owed release must remove it.
	eventually(t, time.Now().Add(10*time.Second), "the frozen re-create running on node 0", func() bool {
		_, _, counter := nodeState(t, nodes, 0, key)
		return counter == l.Token()
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		v, pttl, _ := nodeState(t, nodes, 0, key)
		if v == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node 0 holds %q (PTTL %v) 20s after it resumed: a re-create left behind by an Unlock", v, pttl)
		}
		time.Sleep(time.Millisecond)
	}
	for i := 1; i < 3; i++ {
		if v, _, _ := nodeState(t, nodes, i, key); v != "" {
			t.Errorf("node %d still holds %q after Unlock", i, v)
		}
	}
}

// reacquirePanicker is a ReacquireObserver that panics.
type reacquirePanicker struct{ redlock.NopObserver }

func (reacquirePanicker) Reacquired(string, uint64, int) { panic("observer panic") }

// TestReacquireObserverPanicIsContained: a ReacquireObserver that panics,
// composed with Observers before and after one that records, costs neither
// the Extend nor the other observer its event, and Reacquired still lists
// the re-create.
func TestReacquireObserverPanicIsContained(t *testing.T) {
	nodes := redlocktest.Nodes(t, 3)
	a := &answers{}
	c := reacquireClient(t, nodes, true, redlock.WithObserver(redlock.Observers(reacquirePanicker{}, a, redlock.Observers(reacquirePanicker{}))))
	ctx := t.Context()
	const key = "panicky"
	l := tryLockAll(t, c, a, key, time.Minute)
	forget(t, nodes, 1)
	if err := extendAll(t, l, a, time.Minute); err != nil {
		t.Fatalf("Extend with a panicking ReacquireObserver: %v", err)
	}
	if got := reacquiredSoon(l, 1); len(got) != 1 || got[0] != 1 {
		t.Errorf("Reacquired() = %v, want [1]", got)
	}
	heard := a.heard(1)
	if len(heard) != 1 || heard[0] != 1 {
		t.Errorf("the recording observer heard %v, want [1]", heard)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}

// TestReacquireWithAHashTag: a key with a Redis Cluster hash tag is
// re-created with the fence counter of its slot (the counter the acquire
// drew from), so the next hold of any key of that slot gets a larger token.
func TestReacquireWithAHashTag(t *testing.T) {
	nodes := redlocktest.Nodes(t, 3)
	c, a := observedClient(t, nodes)
	ctx := t.Context()
	const key, sibling = "{user:42}:lock", "{user:42}:other"
	if redlock.FenceKey(key) != redlock.FenceKey(sibling) {
		t.Fatalf("keys of one hash tag have different counters: %q, %q", redlock.FenceKey(key), redlock.FenceKey(sibling))
	}
	l := tryLockAll(t, c, a, key, time.Minute)
	forget(t, nodes, 0)
	forget(t, nodes, 1)
	if err := extendAll(t, l, a, time.Minute); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	for i := range 2 {
		if v, _, counter := nodeState(t, nodes, i, key); v != l.Value() || counter != l.Token() {
			t.Errorf("node %d: value %q counter %d, want the hold's value and token %d", i, v, counter, l.Token())
		}
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l2, err := c.TryLock(ctx, sibling, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l2.Unlock(ctx) }()
	if l2.Token() <= l.Token() {
		t.Errorf("a later hold in the same slot got token %d, not above %d", l2.Token(), l.Token())
	}
}

// TestReacquireHealsACounterAStepBackLeftLow: a node restarts empty under
// a hold; a contender's attempt is granted there (its counter starts again
// from 1), fails on the others and steps back. The hold's next extension
// re-creates the key and lifts the counter to the token; after the hold's
// Unlock, a new hold whose grants come from that node and one other gets a
// larger token — were the counter left low, Claim 1 would rest on the one
// other node alone.
func TestReacquireHealsACounterAStepBackLeftLow(t *testing.T) {
	nodes := redlocktest.Nodes(t, 3)
	c, a := observedClient(t, nodes)
	other := reacquireClient(t, nodes, false)
	ctx := t.Context()
	const key = "low-counter"
	for range 5 { // tokens well above what a restarted node starts from
		l, err := c.TryLock(ctx, key, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	l := tryLockAll(t, c, a, key, time.Minute)
	// The barrier above may have counted the answers to the last Unlock's
	// releases: wait for the grants themselves.
	heldEverywhere(t, nodes, key, l.Value())
	forget(t, nodes, 0)
	if _, err := other.TryLock(ctx, key, time.Minute); !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("a contender's TryLock: %v, want ErrNotAcquired", err)
	}
	eventually(t, time.Now().Add(5*time.Second), "the contender's step back on node 0", func() bool {
		v, _, _ := nodeState(t, nodes, 0, key)
		return v == ""
	})
	if _, _, counter := nodeState(t, nodes, 0, key); counter >= l.Token() {
		t.Fatalf("node 0's counter %d after an empty restart and one grant: the test does not make it low", counter)
	}
	if err := extendAll(t, l, a, time.Minute); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	if v, _, counter := nodeState(t, nodes, 0, key); v != l.Value() || counter != l.Token() {
		t.Fatalf("node 0: value %q counter %d, want the hold's value and token %d", v, counter, l.Token())
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// Node 2 is taken by a stray value: the next hold's grants are nodes
	// 0 and 1, and node 0 is the one the re-create healed.
	if err := nodes[2].Client().Set(ctx, key, "stray", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if err := nodes[1].Client().Set(ctx, redlock.FenceKey(key), 0, 0).Err(); err != nil {
		t.Fatal(err)
	}
	l2, err := c.TryLock(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l2.Unlock(ctx) }()
	if l2.Token() <= l.Token() {
		t.Errorf("the next hold's token %d is not above the re-created hold's %d", l2.Token(), l.Token())
	}
}

// TestExtendAfterCloseRecreatesNothing: once the Client is closed, an
// Extend with the option sends nothing (ErrLockLost) and no key comes back
// on the node that lost it.
func TestExtendAfterCloseRecreatesNothing(t *testing.T) {
	nodes := redlocktest.Nodes(t, 3)
	c, a := observedClient(t, nodes)
	const key = "after-close"
	l := tryLockAll(t, c, a, key, time.Minute)
	forget(t, nodes, 0)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Extend(t.Context(), time.Minute); !errors.Is(err, redlock.ErrLockLost) {
		t.Errorf("Extend after Close: %v, want ErrLockLost", err)
	}
	if v, _, _ := nodeState(t, nodes, 0, key); v != "" {
		t.Errorf("node 0 holds %q: an Extend after Close re-created the key", v)
	}
	if got := l.Reacquired(); len(got) != 0 {
		t.Errorf("Reacquired() = %v after Close", got)
	}
}

// TestExtendRacingUnlockLeavesNoKey: Extends (the caller's and the
// watchdog's) race Unlock on a hold whose key one node lost and another
// node never granted (it refused the acquire, and is free by the time of
// the Extend). Whichever comes first, once the Client has finished its
// calls no node holds the key.
func TestExtendRacingUnlockLeavesNoKey(t *testing.T) {
	nodes := redlocktest.Nodes(t, 3)
	ctx := t.Context()
	for round := range 20 {
		c, a := observedClient(t, nodes)
		key := "race-" + string(rune('a'+round))
		if err := nodes[2].Client().Set(ctx, key, "another-holder", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		l := tryLockAll(t, c, a, key, time.Minute)
		if err := nodes[2].Client().Del(ctx, key).Err(); err != nil {
			t.Fatal(err)
		}
		forget(t, nodes, 0)
		var wg sync.WaitGroup
		start := make(chan struct{})
		extended := make(chan error, 2)
		for range 2 {
			wg.Go(func() {
				<-start
				extended <- l.Extend(ctx, time.Minute)
			})
		}
		var uerr error
		wg.Go(func() {
			<-start
			uerr = l.Unlock(ctx)
		})
		close(start)
		wg.Wait()
		close(extended)
		// Unlock before any Extend finds the key on node 1 alone: lost.
		if uerr != nil && !errors.Is(uerr, redlock.ErrLockLost) {
			t.Errorf("round %d: Unlock: %v", round, uerr)
		}
		for err := range extended {
			if err != nil && !errors.Is(err, redlock.ErrLockLost) {
				t.Errorf("round %d: Extend racing Unlock: %v", round, err)
			}
		}
		if err := l.Extend(ctx, time.Minute); !errors.Is(err, redlock.ErrLockLost) {
			t.Errorf("round %d: Extend after Unlock: %v, want ErrLockLost", round, err)
		}
		if err := c.Close(); err != nil { // waits for the calls in flight
			t.Fatal(err)
		}
		for i := range nodes {
			if v, pttl, _ := nodeState(t, nodes, i, key); v != "" {
				t.Errorf("round %d: node %d holds %q (PTTL %v) after Unlock and Close (re-creates %v)", round, i, v, pttl, l.Reacquired())
			}
		}
	}
}

// replicasAcking waits until every primary's replica acknowledges a write
// (a replica just attached may answer its first WAIT late).
func replicasAcking(t *testing.T, nodes []redis.UniversalClient) {
	t.Helper()
	for i, n := range nodes {
		eventually(t, time.Now().Add(10*time.Second), fmt.Sprintf("node %d's replica acknowledging", i), func() bool {
			if err := n.Set(t.Context(), "warm-up", i, 0).Err(); err != nil {
				return false
			}
			acked, err := n.Do(t.Context(), "wait", 1, 1000).Int64()
			return err == nil && acked >= 1
		})
	}
}

// TestReacquireWaitsForReplicas: with WithReplicaAcks, a re-create counts
// only once a replica has it, as an extend does (replicas.go, durable): two
// nodes lost the key and their replicas' links are held back, so their
// re-creates are written on the primaries but not acknowledged, and the
// Extend must not count them (one confirmed node of three is no quorum).
// With one link held, the other re-create and the node that kept the key
// make a quorum.
func TestReacquireWaitsForReplicas(t *testing.T) {
	for _, tc := range []struct {
		name string
		held []int // nodes whose replica link is held back
		ok   bool  // the Extend succeeds
	}{
		{"two re-creates unacknowledged", []int{0, 1}, false},
		{"one re-create unacknowledged", []int{0}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pairs := startPairs(t, 3)
			nodes := primaries(t, pairs)
			replicasAcking(t, nodes)
			// WAIT's timeout is noticed at the server's 100ms tick: the node
			// timeout leaves it room (docs/protocol.md, replica
			// acknowledgements).
			nodeTimeout := max(500*time.Millisecond, 100*redistest.PingRTT(t, nodes))
			c, err := redlock.New(nodes, redlock.WithNodeTimeout(nodeTimeout), redlock.WithReplicaAcks(1), redlock.WithReacquireOnExtend())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx := t.Context()
			const key = "acked-recreate"
			l, err := c.TryLock(ctx, key, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			eventually(t, time.Now().Add(5*time.Second), "the grants on every node", func() bool {
				for _, n := range nodes {
					if n.Get(ctx, key).Val() != l.Value() {
						return false
					}
				}
				return true
			})
			for _, i := range []int{0, 1} {
				if err := nodes[i].FlushAll(ctx).Err(); err != nil {
					t.Fatal(err)
				}
			}
			for _, i := range tc.held {
				pairs[i].link.Hold()
				defer pairs[i].link.Release()
			}
			err = l.Extend(ctx, time.Minute)
			switch {
			case tc.ok && err != nil:
				t.Fatalf("Extend with one re-create and one extension acknowledged: %v", err)
			case !tc.ok && err == nil:
				t.Fatalf("Extend succeeded on re-creates that no replica acknowledged")
			case !tc.ok && !errors.Is(err, redlock.ErrOutcomeUnknown):
				t.Errorf("Extend: %v, want ErrOutcomeUnknown", err)
			}
			for _, i := range tc.held {
				if v := nodes[i].Get(ctx, key).Val(); v != l.Value() {
					t.Fatalf("primary %d holds %q: the re-create the test is about did not run", i, v)
				}
			}
			_ = l.Unlock(ctx)
		})
	}
}

// TestReacquiredListsUnacknowledgedRecreates: a re-create that the primary
// made but whose replica acknowledgement fell short is still a re-create
// of the hold's key on that node — the key is there, for the whole TTL if
// no Unlock comes. Lock.Reacquired is documented to list every re-create
// ("one entry per re-create", late ones too), so that a checker can account
// for every key of the hold; it must list this one.
func TestReacquiredListsUnacknowledgedRecreates(t *testing.T) {
	pairs := startPairs(t, 3)
	nodes := primaries(t, pairs)
	replicasAcking(t, nodes)
	nodeTimeout := max(500*time.Millisecond, 100*redistest.PingRTT(t, nodes))
	c, err := redlock.New(nodes, redlock.WithNodeTimeout(nodeTimeout), redlock.WithReplicaAcks(1), redlock.WithReacquireOnExtend())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := t.Context()
	const key = "unacked-recreate"
	l, err := c.TryLock(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Now().Add(5*time.Second), "the grant on node 0", func() bool {
		return nodes[0].Get(ctx, key).Val() == l.Value()
	})
	if err := nodes[0].FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	pairs[0].link.Hold()
	defer pairs[0].link.Release()
	if err := l.Extend(ctx, time.Minute); err != nil {
		t.Fatalf("Extend with two nodes acknowledged: %v", err)
	}
	// Node 0 answers once its WAIT gave up: within its node timeout.
	eventually(t, time.Now().Add(5*time.Second), "node 0's re-create", func() bool {
		return nodes[0].Get(ctx, key).Val() == l.Value()
	})
	time.Sleep(2 * nodeTimeout) // its answer is in by then
	if got := l.Reacquired(); len(got) != 1 || got[0] != 0 {
		t.Errorf("Reacquired() = %v, want [0]: node 0 holds the hold's key, re-created by the Extend (its replica did not acknowledge it)", got)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// Unlock returns on a quorum of releases: node 0's may still be on its
	// way, and must arrive.
	eventually(t, time.Now().Add(5*time.Second), "node 0's key released after Unlock", func() bool {
		return nodes[0].Get(ctx, key).Val() == ""
	})
}

// gatedClient is a Client with the option over gatedClients, on a fake
// clock, its node timeout long enough for the delays a test makes.
func gatedClient(t *testing.T, nodes redlocktest.NodeSet, gate *delayGate, clk clock.Clock) *redlock.Client {
	t.Helper()
	nodeTimeout := max(2*time.Second, 1000*redistest.PingRTT(t, nodes.Clients()))
	c, err := redlock.New(gatedClients(t, nodes, gate), redlock.WithClock(clk), redlock.WithReacquireOnExtend(),
		redlock.WithNodeTimeout(nodeTimeout))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestWatchdogReacquireLandingAfterTheValidityDoesNotResurrect: the
// watchdog's extension is sent within the validity, and its re-creates are
// delayed on their way until after the validity ran out. The hold ends at
// Until (Done closes) and must stay ended when they land: no TTL comes back,
// a further Extend says lost, and the keys they made go with the Unlock.
func TestWatchdogReacquireLandingAfterTheValidityDoesNotResurrect(t *testing.T) {
	nodes := redlocktest.Nodes(t, 3)
	ctx := t.Context()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	gate := newDelayGate()
	c := gatedClient(t, nodes, gate, clk)
	const key = "watchdog-resurrect"
	const ttl = time.Minute
	l, err := c.TryLock(ctx, key, ttl, redlock.AutoExtend())
	if err != nil {
		t.Fatal(err)
	}
	for i := range nodes {
		forget(t, nodes, i) // every node lost it: only re-creates can count
	}
	gate.arm(0, 1, 2)
	if err := clk.BlockUntilContext(ctx, 1); err != nil { // the scheduler waits
		t.Fatal(err)
	}
	clk.Advance(ttl / 3) // the watchdog's extension is due
	gate.waitHeld(t, 3)
	clk.Advance(l.Until().Sub(clk.Now()))
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done still open 10s after Until")
	}
	gate.letGo()
	for i := range nodes { // the re-creates land
		eventually(t, time.Now().Add(10*time.Second), fmt.Sprintf("node %d's re-create", i), func() bool {
			v, _, _ := nodeState(t, nodes, i, key)
			return v == l.Value()
		})
	}
	if ttl := l.TTL(); ttl > 0 {
		t.Errorf("TTL %v after the hold ended at Until: the watchdog's late re-creates brought it back", ttl)
	}
	if err := l.Extend(ctx, time.Minute); !errors.Is(err, redlock.ErrLockLost) {
		t.Errorf("Extend after the hold ended: %v, want ErrLockLost", err)
	}
	if err := l.Unlock(ctx); err != nil && !errors.Is(err, redlock.ErrLockLost) {
		t.Errorf("Unlock: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for i := range nodes {
		if v, _, _ := nodeState(t, nodes, i, key); v != "" {
			t.Errorf("node %d holds %q after Unlock and Close: the late re-create stays for its TTL", i, v)
		}
	}
}

// TestReacquireExtendAndUnlockWithAFrozenNodeReturnInTime: the node whose
// answer decides is frozen (another value holds a second node, a third
// lost the key). Extend cannot know the outcome and must say so within its
// node timeout, not wait for the node; Unlock too.
func TestReacquireExtendAndUnlockWithAFrozenNodeReturnInTime(t *testing.T) {
	nodes := redlocktest.Nodes(t, 3)
	nodeTimeout := max(250*time.Millisecond, 100*redistest.PingRTT(t, nodes.Clients()))
	c, a := observedClient(t, nodes, redlock.WithNodeTimeout(nodeTimeout))
	ctx := t.Context()
	const key = "frozen-decider"
	l := tryLockAll(t, c, a, key, time.Minute)
	forget(t, nodes, 1)
	if err := nodes[1].Client().Set(ctx, key, "another-holder", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	forget(t, nodes, 2)
	if err := nodes[0].Pause(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = nodes[0].Resume() }()
	// Each waits at most a node timeout for the frozen node (Unlock also
	// for the Extend before it); the bound leaves a loaded machine ten.
	bound := 10 * nodeTimeout
	start := time.Now()
	err := l.Extend(context.Background(), time.Minute)
	if took := time.Since(start); took > bound {
		t.Errorf("Extend took %v with the deciding node frozen (node timeout %v)", took, nodeTimeout)
	}
	if !errors.Is(err, redlock.ErrOutcomeUnknown) {
		t.Errorf("Extend with one re-create, one refusal and one frozen node: %v, want ErrOutcomeUnknown", err)
	}
	start = time.Now()
	err = l.Unlock(context.Background())
	if took := time.Since(start); took > bound {
		t.Errorf("Unlock took %v with a node frozen (node timeout %v)", took, nodeTimeout)
	}
	if !errors.Is(err, redlock.ErrOutcomeUnknown) {
		t.Errorf("Unlock with one release, one refusal and one frozen node: %v, want ErrOutcomeUnknown", err)
	}
	if v, _, _ := nodeState(t, nodes, 2, key); v != "" {
		t.Errorf("node 2 holds %q after Unlock: its re-create was not released", v)
	}
	if v, _, _ := nodeState(t, nodes, 1, key); v != "another-holder" {
		t.Errorf("node 1 holds %q: another hold's key was touched", v)
	}
}

// heldEverywhere waits until every node holds key with value: the grants
// that came after the acquire decided have landed.
func heldEverywhere(t *testing.T, nodes redlocktest.NodeSet, key, value string) {
	t.Helper()
	eventually(t, time.Now().Add(5*time.Second), "the grants on every node", func() bool {
		for i := range nodes {
			if v, _, _ := nodeState(t, nodes, i, key); v != value {
				return false
			}
		}
		return true
	})
}

// TestReacquireWithAShorterTTL: an Extend to a shorter TTL re-creates the
// key for that TTL, not the hold's first one, and Until follows it.
func TestReacquireWithAShorterTTL(t *testing.T) {
	nodes := redlocktest.Nodes(t, 3)
	c, a := observedClient(t, nodes)
	const key = "shorter"
	l := tryLockAll(t, c, a, key, time.Hour)
	forget(t, nodes, 0)
	if err := extendAll(t, l, a, time.Minute); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	v, pttl, _ := nodeState(t, nodes, 0, key)
	if v != l.Value() || pttl > time.Minute || pttl <= 0 {
		t.Errorf("node 0: value %q PTTL %v, want the hold's value for at most the extension's minute", v, pttl)
	}
	if l.TTL() > time.Minute {
		t.Errorf("TTL %v after an Extend to a minute", l.TTL())
	}
	if err := l.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestUnlockWithACancelledCtxReleasesRecreates: Unlock's releases go out
// even when its ctx is already cancelled — to every node once an Extend
// with the option was sent, so the key it re-created on a node that had
// refused the acquire goes too.
func TestUnlockWithACancelledCtxReleasesRecreates(t *testing.T) {
	const key = "cancelled-unlock"
	nodes, a, l := reacquiredOnARefuser(t, key)
	ctx := t.Context()
	if got := reacquiredSoon(l, 1); len(got) != 1 || got[0] != 2 {
		t.Fatalf("Reacquired() = %v, want [2]", got)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	before := a.counts()
	if err := l.Unlock(cancelled); err != nil && !errors.Is(err, redlock.ErrOutcomeUnknown) {
		t.Errorf("Unlock with a cancelled ctx: %v, want nil or ErrOutcomeUnknown", err)
	}
	a.settled(t, before)
	for i := range nodes {
		if v, _, _ := nodeState(t, nodes, i, key); v != "" {
			t.Errorf("node %d holds %q after an Unlock with a cancelled ctx", i, v)
		}
	}
}

// TestRollingLossOfFiveNodesUnderExtends: five nodes lose their data one at
// a time (assumption R: each only once the hold re-created its key on the
// one before), twice round, under a hold the caller extends. The hold is
// never lost, every node ends with its key and the token, and the next
// hold's token is larger — whatever quorum it draws from.
func TestRollingLossOfFiveNodesUnderExtends(t *testing.T) {
	nodes := redlocktest.Nodes(t, 5)
	c, err := redlock.New(nodes.Clients(), redlock.WithNodeTimeout(max(250*time.Millisecond, 100*redistest.PingRTT(t, nodes.Clients()))),
		redlock.WithReacquireOnExtend())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := t.Context()
	const key = "rolling-five"
	l, err := c.TryLock(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	heldEverywhere(t, nodes, key, l.Value())
	for round := range 10 {
		i := round % 5
		forget(t, nodes, i)
		if err := extendUntil(t, l, time.Minute, func() bool {
			got := l.Reacquired()
			return len(got) > round && got[len(got)-1] == i
		}); err != nil {
			t.Fatalf("round %d: Extend after node %d lost the key: %v", round, i, err)
		}
	}
	for i := range nodes {
		if v, _, counter := nodeState(t, nodes, i, key); v != l.Value() || counter != l.Token() {
			t.Errorf("node %d: value %q counter %d, want the hold's value and token %d", i, v, counter, l.Token())
		}
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// The next hold draws from nodes 2, 3 and 4 only (the others are taken
	// by stray values): each was healed by a re-create alone.
	for _, i := range []int{0, 1} {
		if err := nodes[i].Client().Set(ctx, key, "stray", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	l2, err := c.TryLock(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l2.Unlock(ctx) }()
	if l2.Token() <= l.Token() {
		t.Errorf("the next hold's token %d is not above %d", l2.Token(), l.Token())
	}
}
