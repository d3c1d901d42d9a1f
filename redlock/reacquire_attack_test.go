package redlock_test

import (
	"context"
	_ "embed"
	"errors"
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

//go:embed scripts/reacquire.lua
var reacquireSource string

// reacquireSHA is what EVALSHA names the reacquire script by.
var reacquireSHA = redis.NewScript(reacquireSource).Hash()

// isReacquire matches a call of the reacquire script, by its digest or its
// source.
func isReacquire(cmd redis.Cmder) bool {
	args := cmd.Args()
	if len(args) < 2 {
		return false
	}
	switch cmd.Name() {
	case "evalsha":
		return args[1] == reacquireSHA
	case "eval":
		return args[1] == reacquireSource
	}
	return false
}

// delayGate is a go-redis hook that holds back the calls of the reacquire
// script, before they are written, while armed: a request that the network
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

// arm holds back the next reacquire call to each of nodes.
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
			t.Fatalf("fewer than %d reacquire calls were sent in 10s", n)
		}
	}
}

// letGo sends the calls held back.
func (g *delayGate) letGo() { close(g.release) }

// take reports whether cmd, to node, is to be held back (and disarms it).
func (g *delayGate) take(node int, cmd redis.Cmder) bool {
	if !isReacquire(cmd) {
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
// with the options the lock advises, each behind g, with the reacquire
// script already loaded (so that the first call is the EVALSHA the gate
// holds, not a NOSCRIPT answer).
func gatedClients(t *testing.T, nodes redlocktest.NodeSet, g *delayGate) []redis.UniversalClient {
	t.Helper()
	cs := make([]redis.UniversalClient, len(nodes))
	for i, n := range nodes {
		c := redis.NewClient(&redis.Options{Addr: n.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
		t.Cleanup(func() { _ = c.Close() })
		if err := redis.NewScript(reacquireSource).Load(t.Context(), c).Err(); err != nil {
			t.Fatal(err)
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
// key and releases it. Then the re-creates land, on every node. The hold
// was over before any of them ran: R3's purpose is that a holder never
// comes to believe it still holds the lock after its validity ran out
// (docs/protocol.md: such a key "belongs to a hold that is over"), so the
// Extend must not succeed. Done is not watched, as a caller that only
// calls Extend does not.
func TestReacquireLandingAfterTheValidityDoesNotResurrect(t *testing.T) {
	nodes := redlocktest.Nodes(t, 3)
	ctx := t.Context()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	gate := newDelayGate()
	// The node timeout covers the delay the test makes (a few local round
	// trips), with the margin of a loaded machine.
	nodeTimeout := max(2*time.Second, 1000*redistest.PingRTT(t, nodes.Clients()))
	a, err := redlock.New(gatedClients(t, nodes, gate), redlock.WithClock(clk), redlock.WithReacquireOnExtend(),
		redlock.WithNodeTimeout(nodeTimeout))
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
}
