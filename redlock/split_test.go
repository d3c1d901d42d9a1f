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
		if res, _ := reply.([]any); len(res) == 5 { // refused: the contender steps back
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

// A node re-asked by a split vote's winner still counts with its first
// answer (a refusal) until the re-ask answers. An Unlock in between leaves it
// out of its release (a refuser); the re-ask's grant, answered in time after
// the Unlock, must still be stepped back.

// reaskHook, on one node, runs first after the first acquire call answered,
// and holds back the reply of the second (the re-ask) after the node applied
// it, until open is closed.
type reaskHook struct {
	sha, body string
	first     func()
	hold      bool
	held      chan struct{}
	open      chan struct{}

	mu sync.Mutex
	n  int
}

func (h *reaskHook) match(c redis.Cmder) bool {
	a := c.Args()
	return len(a) > 1 && (a[1] == h.sha || a[1] == h.body) && c.Err() == nil
}

func (h *reaskHook) after(cmds ...redis.Cmder) {
	for _, c := range cmds {
		if _, ok := c.(*redis.Cmd); !ok || !h.match(c) {
			continue
		}
		if _, ok := c.(*redis.Cmd).Val().([]any); !ok {
			continue // an EVALSHA that found no script: an EVAL follows
		}
		h.mu.Lock()
		h.n++
		n := h.n
		h.mu.Unlock()
		switch {
		case n == 1:
			h.first()
		case n == 2 && h.hold:
			h.held <- struct{}{}
			<-h.open
		}
	}
}

// 5 nodes, node 4 down; nodes 2 and 3 hold the key for a contender with a
// larger value (a 2-2 tie this attempt wins). Once both refused, the
// contender's keys go; the re-ask grants on node 2 (quorum: the Lock is
// returned) while node 3's re-ask grant is applied and its reply held. The
// Lock is unlocked, then node 3's reply comes through, in time: no key may
// remain on any node.
func TestSplitReaskGrantAfterUnlockIsReleased(t *testing.T) {
	const key = "split:reask"
	r := newRig(t, 5)
	g := newReplyGate(t, "acquire.lua") // for its sha and body
	var (
		mu      sync.Mutex
		refused int
	)
	dropContender := func() {
		mu.Lock()
		defer mu.Unlock()
		if refused++; refused == 2 { // both applied: the contender steps back
			for _, i := range []int{2, 3} {
				if err := r.clients[i].Del(context.Background(), key).Err(); err != nil {
					t.Error(err)
				}
			}
		}
	}
	h2 := &reaskHook{sha: g.sha, body: g.body, first: dropContender}
	h3 := &reaskHook{sha: g.sha, body: g.body, first: dropContender, hold: true,
		held: make(chan struct{}, 1), open: make(chan struct{})}
	r.clients[2].AddHook(redistest.AfterReply(h2.after))
	r.clients[3].AddHook(redistest.AfterReply(h3.after))

	opened := false
	openGate := func() {
		if !opened {
			opened = true
			close(h3.open)
		}
	}
	defer openGate()
	c := r.client(t)
	if err := r.procs[4].Kill(); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{2, 3} {
		if err := r.clients[i].Set(t.Context(), key, bigValue, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}

	l, err := c.TryLock(t.Context(), key, time.Minute)
	if err != nil {
		t.Fatalf("TryLock: %v", err)
	}
	select {
	case <-h3.held:
	case <-time.After(5 * time.Second):
		t.Fatal("node 3 was not asked again")
	}
	if err := l.Unlock(t.Context()); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	for i, cl := range r.clients[:4] {
		v, _ := cl.Get(t.Context(), key).Result()
		t.Logf("before the reply: node %d: %q (hold %q)", i, v, l.Value())
	}
	openGate() // node 3's re-ask answers now, well within its node timeout
	deadline := time.Now().Add(2 * time.Second)
	for r.anyKey(t, key) > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := r.anyKey(t, key); n > 0 {
		for i, cl := range r.clients[:4] {
			v, _ := cl.Get(t.Context(), key).Result()
			t.Logf("node %d: %q (hold %q)", i, v, l.Value())
		}
		t.Fatalf("key left on %d nodes 2s after Unlock returned (until its TTL of a minute)", n)
	}
}
