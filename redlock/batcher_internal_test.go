package redlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/internal/redistest"
)

// A batch carries calls with different deadlines (a 10s-TTL acquire next to
// a 1s-TTL one). Each call must keep its own: the short one times out at its
// deadline, and the long one gets the node's answer, which comes after the
// short deadline but well within its own.
func TestBatchKeepsEachCallsDeadline(t *testing.T) {
	p := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	c, err := New([]redis.UniversalClient{rdb})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx := t.Context()
	start := time.Now()
	for range 10 {
		if err := rdb.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	rtt := time.Since(start) / 10
	short := max(20*rtt, 20*time.Millisecond) // the 1s-TTL call's timeout
	pause := 4 * short                        // how late the node answers
	long := 20 * short                        // the 10s-TTL call's timeout

	// The node answers nothing for pause: a real server, stopped (SIGSTOP)
	// and resumed, as a slow or busy node would be.
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	resume := time.AfterFunc(pause, func() { _ = p.Resume() })
	defer resume.Stop()
	longRes, shortRes := make(resultSink, 1), make(resultSink, 1)
	ka, aa := acquireCall("a", "v1", 10*time.Second)
	kb, ab := acquireCall("b", "v2", time.Second)
	gLong := c.newGroup(longRes, long, []int{0}, acquireScript, ka, aa...)
	gShort := c.newGroup(shortRes, short, []int{0}, acquireScript, kb, ab...)
	gLong.arm()
	gShort.arm()
	start = time.Now()
	c.batchers[0].exec([]*op{&gShort.ops[0], &gLong.ops[0]})
	if r := <-longRes; r.err != nil {
		t.Fatalf("long call failed after %v (its timeout %v, the node answered after about %v): %v",
			time.Since(start), long, pause, r.err)
	}
	// The short call times out at its own deadline, unless a loaded machine
	// ran its timer after the answer: either way it completed exactly once.
	if r := <-shortRes; r.err != nil && !errors.Is(r.err, errNodeTimeout) {
		t.Fatalf("short call: %v", r.err)
	}
}

// A release's pipeline gets at least the release's node timeout from the
// moment it is sent, however long it waited in the queue: under load, a
// step back whose deadline ran out in the queue, or while go-redis's pool
// made it wait for a connection, never reached its node, and its grant
// stayed for the whole TTL (seen in TestCloseDuringCalls's trace:
// "context deadline exceeded" on the late send). Other calls keep the
// batch's latest deadline.
func TestWireContextGivesAReleaseItsNodeTimeout(t *testing.T) {
	now := time.Now()
	mk := func(script *redis.Script, timeout, left time.Duration) *op {
		g := &group{timeout: timeout}
		var cancel context.CancelFunc
		g.ctx, cancel = context.WithDeadline(context.Background(), now.Add(left))
		t.Cleanup(cancel)
		return &op{g: g, script: script}
	}
	const nt = 50 * time.Millisecond
	deadline := func(live ...*op) time.Time {
		ctx, cancel := wireContext(live, now)
		defer cancel()
		d, _ := ctx.Deadline()
		return d
	}
	acquire := mk(acquireScript, nt, 30*time.Millisecond)
	if d := deadline(acquire, mk(acquireScript, nt, 10*time.Millisecond)); !d.Equal(now.Add(30 * time.Millisecond)) {
		t.Errorf("acquires only: wire deadline %v from now, want the latest call's, 30ms", d.Sub(now))
	}
	if d := deadline(mk(releaseScript, nt, -20*time.Millisecond)); d.Before(now.Add(nt)) {
		t.Errorf("a release whose deadline passed in the queue: wire deadline %v from now, want at least its node timeout %v", d.Sub(now), nt)
	}
	if d := deadline(acquire, mk(releaseScript, nt, time.Millisecond)); d.Before(now.Add(nt)) {
		t.Errorf("a release about to time out, with an acquire: wire deadline %v from now, want at least %v", d.Sub(now), nt)
	}
	if d := deadline(mk(acquireScript, nt, 2*nt), mk(releaseScript, nt, time.Millisecond)); !d.Equal(now.Add(2 * nt)) {
		t.Errorf("a call with more time than the release: wire deadline %v from now, want its %v", d.Sub(now), 2*nt)
	}
}
