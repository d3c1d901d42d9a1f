package redlock

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/internal/redistest"
)

// holdHook is a go-redis hook that holds node calls the way a frozen node
// does. While pings is set, every PING waits for its ctx (a probe finds the
// node still down). Once armed, the next EVALSHA waits until release is
// closed and then fails with context.DeadlineExceeded: what go-redis reports
// for a call to a frozen node whose deadline passed, when the call ends.
type holdHook struct {
	pings   atomic.Bool
	armed   atomic.Bool
	arrived chan struct{} // gets a value when the armed EVALSHA is held
	release chan struct{}
}

func newHoldHook() *holdHook {
	return &holdHook{arrived: make(chan struct{}, 1), release: make(chan struct{})}
}

func (*holdHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (*holdHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *holdHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		switch {
		case cmd.Name() == "ping" && h.pings.Load():
			<-ctx.Done()
			cmd.SetErr(ctx.Err())
			return ctx.Err()
		case cmd.Name() == "evalsha" && h.armed.CompareAndSwap(true, false):
			h.arrived <- struct{}{}
			<-h.release
			cmd.SetErr(context.DeadlineExceeded)
			return context.DeadlineExceeded
		}
		return next(ctx, cmd)
	}
}

// A call to a frozen node whose deadline passed was noted then, as a node
// timeout (group.expire), and left the node unmarked while another node
// used the marks a quorum allows. go-redis reports the same call as a
// deadline error when it ends, once the node runs again; by then the other
// node's mark may be lifted. That error must not mark the node down: it
// did, and the call queued behind it on the node's worker failed as "node
// down, call not sent" although the node answered (an auto-extension's
// retry failed so, on a cluster whose nodes had all woken up).
func TestALateDeadlineErrorDoesNotMarkTheNodeAgain(t *testing.T) {
	hooks := []*holdHook{newHoldHook(), newHoldHook(), newHoldHook()}
	var nodes []redis.UniversalClient
	for i, p := range redistest.StartN(t, 3) {
		n := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1})
		n.AddHook(hooks[i])
		t.Cleanup(func() { _ = n.Close() })
		nodes = append(nodes, n)
	}
	nt := max(100*redistest.PingRTT(t, nodes), 50*time.Millisecond)
	c, err := New(nodes, WithNodeTimeout(nt))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	t.Cleanup(func() {
		select {
		case <-hooks[1].release:
		default:
			close(hooks[1].release)
		}
	})
	keys, args := []string{"late-deadline"}, []any{"someone", int64(1000)}

	// Node 0 is marked down and its probe finds it down: with 3 nodes, the
	// one mark a quorum allows is taken. Node 1's probe, should one start,
	// finds it down too, so that a mark stays for the call below to see.
	hooks[0].pings.Store(true)
	hooks[1].pings.Store(true)
	c.failed(0, errNodeTimeout, nt)
	if !c.isDown(0) {
		t.Fatal("setup: node 0 not marked down")
	}

	// A call to node 1 that the node does not answer by its deadline: it
	// is noted as a timeout, and node 1 stays unmarked (no mark is left).
	hooks[1].armed.Store(true)
	first := make(resultSink, 1)
	c.newGroup(first, nt, []int{1}, extendScript, keys, args...).start()
	<-hooks[1].arrived
	if r := <-first; !errors.Is(r.err, errNodeTimeout) {
		t.Fatalf("the held call completed with %v, %v; want a node timeout", r.v, r.err)
	}
	for deadline := time.Now().Add(20 * nt); !c.health[1].failing.Load(); {
		if time.Now().After(deadline) { // expire notes the timeout just after it completes the call
			t.Fatal("node 1's timeout not noted")
		}
		time.Sleep(time.Millisecond) // polling the Client's state, bounded
	}
	if c.isDown(1) {
		t.Fatal("node 1 marked down beyond the marks a quorum allows")
	}

	// A call queued behind it on node 1's worker (the same key), then node
	// 0 answers (its mark is lifted), then the held call ends as go-redis
	// ends it: with a deadline error.
	second := make(resultSink, 1)
	c.newGroup(second, time.Minute, []int{1}, extendScript, keys, args...).start() // a bound, not a synchronisation
	hooks[0].pings.Store(false)
	c.answered(0)
	close(hooks[1].release)

	r := <-second
	if r.err != nil {
		t.Fatalf("the call behind the late deadline error failed: %v; want node 1's answer", r.err)
	}
	if c.isDown(1) {
		t.Fatal("node 1 marked down by a deadline error noted already")
	}
}
