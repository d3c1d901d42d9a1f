package redlock_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/internal/redistest"
	"github.com/fencedlock/fencedlock/redlock"
)

// The split-vote rule: a refusal names the holder's value, the value with
// the most grants (the smaller on a tie) keeps its grants and asks the other
// nodes again, the others step back at once.

// scriptCalls is a go-redis hook that counts the calls of one script, and
// runs after (when set) once each such call answered.
type scriptCalls struct {
	sha, body string
	n         atomic.Int32
	after     func(reply any)
}

func newScriptCalls(t testing.TB, script string, after func(any)) *scriptCalls {
	g := newReplyGate(t, script) // for its sha and body
	return &scriptCalls{sha: g.sha, body: g.body, after: after}
}

func (h *scriptCalls) match(c redis.Cmder) bool {
	a := c.Args()
	return len(a) > 1 && (a[1] == h.sha || a[1] == h.body) && c.Err() == nil
}

func (h *scriptCalls) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *scriptCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err == nil && h.match(cmd) {
			h.n.Add(1)
			if h.after != nil {
				h.after(cmd.(*redis.Cmd).Val())
			}
		}
		return err
	}
}
func (h *scriptCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			if h.match(cmd) {
				h.n.Add(1)
				if h.after != nil {
					h.after(cmd.(*redis.Cmd).Val())
				}
			}
		}
		return err
	}
}

// splitRig is 3 nodes, node 2 killed; node 0 holds the key for a contender
// with the given value (its partial grant), set directly.
func splitRig(t *testing.T, key, contender string, hook redis.Hook) (*rig, *redlock.Client) {
	t.Helper()
	r := newRig(t, 3)
	if hook != nil {
		r.clients[0].AddHook(hook)
	}
	c := r.client(t)
	if err := r.procs[2].Kill(); err != nil {
		t.Fatal(err)
	}
	if err := r.clients[0].Set(t.Context(), key, contender, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	return r, c
}

// The winner of a tie whose contender never steps back asks its node again
// maxReasks times, then fails and leaves no grant behind, within a few node
// timeouts; the contender's grant is untouched.
func TestSplitWinnerGivesUpCleanly(t *testing.T) {
	const key = "split:winner"
	calls := newScriptCalls(t, "acquire.lua", nil)
	r, c := splitRig(t, key, bigValue, calls)
	start := time.Now()
	_, err := c.TryLock(t.Context(), key, time.Minute)
	took := time.Since(start)
	if !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("TryLock: %v, want ErrNotAcquired", err)
	}
	if n := calls.n.Load(); n != 1+3 {
		t.Errorf("node 0 was asked %d times, want 1 and 3 re-asks (it won the tie)", n)
	}
	if n := r.holders(t, key, bigValue); n != 1 {
		t.Errorf("the contender's grant on node 0 is gone")
	}
	if n := r.anyKey(t, key); n != 1 {
		t.Errorf("key on %d live nodes after the failed attempt, want only the contender's", n)
	}
	// The re-asks stop at one node timeout after the split showed; the
	// attempt then releases: a few node timeouts at most.
	nt := max(250*time.Millisecond, 100*r.rtt)
	if took > 4*nt {
		t.Errorf("the failed attempt took %v, over 4 node timeouts (%v)", took, 4*nt)
	}
	t.Logf("winner gave up after %v", took)
}

// The loser of a tie steps back at once: no re-ask, no grant left.
func TestSplitLoserStepsBack(t *testing.T) {
	const key = "split:loser"
	calls := newScriptCalls(t, "acquire.lua", nil)
	r, c := splitRig(t, key, smallValue, calls)
	_, err := c.TryLock(t.Context(), key, time.Minute)
	if !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("TryLock: %v, want ErrNotAcquired", err)
	}
	if n := calls.n.Load(); n != 1 {
		t.Errorf("node 0 was asked %d times, want once (it lost the tie)", n)
	}
	if n := r.anyKey(t, key); n != 1 {
		t.Errorf("key on %d live nodes after the failed attempt, want only the contender's", n)
	}
}

// The winner whose contender steps back gets the node on a re-ask: the hold
// is real on a quorum, its token is above every counter, and Unlock clears
// every node.
func TestSplitWinnerTakesReaskedNode(t *testing.T) {
	const key = "split:taken"
	var (
		r      *rig
		once   sync.Once
		direct = make(chan *redis.Client, 1)
	)
	calls := newScriptCalls(t, "acquire.lua", func(reply any) {
		if res, _ := reply.([]any); len(res) == 4 { // refused: the contender steps back
			once.Do(func() {
				d := <-direct
				d.Del(context.Background(), key)
			})
		}
	})
	r, c := splitRig(t, key, bigValue, calls)
	d := redis.NewClient(&redis.Options{Addr: r.procs[0].Addr()})
	t.Cleanup(func() { _ = d.Close() })
	direct <- d
	// Counters: node 0 lags behind node 1, so the token must come from
	// node 1's and node 0 must be raised or healed to it.
	if err := r.clients[1].Set(t.Context(), redlock.FenceKey(key), "41", 0).Err(); err != nil {
		t.Fatal(err)
	}
	l, err := c.TryLock(t.Context(), key, time.Minute)
	if err != nil {
		t.Fatalf("TryLock: %v (the contender stepped back before the re-ask)", err)
	}
	if n := calls.n.Load(); n != 2 {
		t.Errorf("node 0 was asked %d times, want 2", n)
	}
	if n := r.holders(t, key, l.Value()); n != 2 {
		t.Fatalf("hold on %d nodes, want 2", n)
	}
	if l.Token() <= 41 {
		t.Fatalf("token %d, want above node 1's counter 41", l.Token())
	}
	for i := range 2 {
		if got := r.clients[i].Get(t.Context(), redlock.FenceKey(key)).Val(); got != "42" {
			t.Errorf("node %d counter %s, want 42", i, got)
		}
	}
	if err := l.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := r.anyKey(t, key); n != 0 {
		t.Errorf("key on %d live nodes after Unlock", n)
	}
}

// K separate Clients split the votes with a node down (killed or frozen):
// holds never overlap, and tokens strictly increase from hold to hold.
func TestSplitContendersStaySafe(t *testing.T) {
	t.Parallel() // checks safety, and liveness by a wide margin: runs beside the others of its kind
	for _, fault := range []string{"killed", "paused"} {
		t.Run(fault, func(t *testing.T) {
			r := newRig(t, 5)
			rtt := redistest.PingRTT(t, r.clients)
			nodeTimeout := max(50*time.Millisecond, 20*rtt)
			ttl := 20 * nodeTimeout
			switch fault {
			case "killed":
				if err := r.procs[4].Kill(); err != nil {
					t.Fatal(err)
				}
			case "paused":
				if err := r.procs[4].Pause(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = r.procs[4].Resume() })
			}
			const k = 4
			clients := separateClients(t, r, k, nodeTimeout)
			var (
				mu     sync.Mutex // protects tokens, inside
				tokens []uint64
				inside bool
				wg     sync.WaitGroup
			)
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			defer cancel()
			for _, c := range clients {
				for range 2 {
					wg.Go(func() {
						for ctx.Err() == nil {
							l, err := c.Lock(ctx, "split:hot", ttl)
							if err != nil {
								if !errors.Is(err, redlock.ErrNotAcquired) {
									t.Errorf("Lock: %v", err)
								}
								continue
							}
							mu.Lock()
							if inside {
								t.Errorf("two holders at once (token %d)", l.Token())
							}
							inside = true
							tokens = append(tokens, l.Token())
							mu.Unlock()
							if time.Now().After(l.Until()) {
								t.Errorf("a hold returned past its validity")
							}
							mu.Lock()
							inside = false
							mu.Unlock()
							_ = l.Unlock(context.WithoutCancel(ctx))
						}
					})
				}
			}
			wg.Wait()
			if !slices.IsSorted(tokens) || len(slices.Compact(slices.Clone(tokens))) != len(tokens) {
				t.Errorf("tokens not strictly increasing: %v", tokens)
			}
			if len(tokens) < k {
				t.Errorf("only %d holds in 2s among %d clients with a node %s", len(tokens), k, fault)
			}
			t.Logf("%s: %d holds", fault, len(tokens))
		})
	}
}
