package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/clock"
	"github.com/fencedlock/fencedlock/internal/redistest"
	"github.com/fencedlock/fencedlock/redlock"
	"github.com/fencedlock/fencedlock/redlocktest"
)

// WithReacquireOnExtend: an Extend re-creates the hold's key with NX on a
// node that lost it, heals that node's fence counter to the hold's token,
// counts the node only where that succeeded, and only while the validity
// lasts. Without the option a vanished key stays vanished.

// reacquireClient is a Client on nodes with the option (or without), its
// node timeout derived from the measured round trip.
func reacquireClient(t *testing.T, nodes redlocktest.NodeSet, reacquire bool, opts ...redlock.Option) *redlock.Client {
	t.Helper()
	opts = append([]redlock.Option{redlock.WithNodeTimeout(max(250*time.Millisecond, 100*redistest.PingRTT(t, nodes.Clients())))}, opts...)
	if reacquire {
		opts = append(opts, redlock.WithReacquireOnExtend())
	}
	c, err := redlock.New(nodes.Clients(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// nodeState is what node i holds for key: its value ("" when absent), its
// PTTL, and its fence counter (0 when absent).
func nodeState(t *testing.T, nodes redlocktest.NodeSet, i int, key string) (string, time.Duration, uint64) {
	t.Helper()
	rdb := nodes[i].Client()
	v, err := rdb.Get(t.Context(), key).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatalf("node %d: GET: %v", i, err)
	}
	pttl := rdb.PTTL(t.Context(), key).Val()
	c, err := rdb.Get(t.Context(), redlock.FenceKey(key)).Result()
	if errors.Is(err, redis.Nil) {
		return v, pttl, 0
	}
	if err != nil {
		t.Fatalf("node %d: GET counter: %v", i, err)
	}
	n, err := strconv.ParseUint(c, 10, 64)
	if err != nil {
		t.Fatalf("node %d: counter %q: %v", i, c, err)
	}
	return v, pttl, n
}

// extendKnown extends l until the outcome is known. The first call after a
// node restarted may find the connections it had closed: the node is then
// marked down until a probe finds it up, and a quorum left neither
// confirmed nor denied is ErrOutcomeUnknown, which the caller retries.
func extendKnown(t *testing.T, l *redlock.Lock, ttl time.Duration) error {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := l.Extend(t.Context(), ttl)
		if !errors.Is(err, redlock.ErrOutcomeUnknown) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(time.Millisecond)
	}
}

// extendUntil extends l until done reports true or an Extend fails with
// another error than ErrOutcomeUnknown, and returns the last Extend's
// error. A node that restarted is marked down by the Client when its first
// call finds the old connections closed, until a probe finds it up: the
// extensions meanwhile succeed without it (or leave the outcome unknown),
// and a later one re-creates the key there, as the watchdog's would. done
// also sees the answers that came after an Extend decided at a quorum.
func extendUntil(t *testing.T, l *redlock.Lock, ttl time.Duration, done func() bool) error {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := l.Extend(t.Context(), ttl)
		if err != nil && !errors.Is(err, redlock.ErrOutcomeUnknown) {
			return err
		}
		for range 50 { // the answers after the decision: a few round trips
			if done() {
				return err
			}
			time.Sleep(time.Millisecond)
		}
		if time.Now().After(deadline) {
			t.Fatalf("extensions for 10s did not get there (last: %v; re-creates %v)", err, l.Reacquired())
		}
	}
}

// reacquired reports whether l's re-creates, sorted, are want.
func reacquired(l *redlock.Lock, want ...int) func() bool {
	return func() bool {
		got := l.Reacquired()
		slices.Sort(got)
		return slices.Equal(got, want)
	}
}

// answers counts, per node, the calls answered or failed: a barrier that
// tells a test every node has had an Extend's call.
type answers struct {
	redlock.NopObserver
	mu         sync.Mutex
	n          [3]int
	reacquired []int // the nodes ReacquireObserver heard of
}

func (a *answers) Reacquired(_ string, _ uint64, node int) {
	a.mu.Lock()
	a.reacquired = append(a.reacquired, node)
	a.mu.Unlock()
}

func (a *answers) NodeRoundTrip(node int, _ time.Duration) { a.add(node) }
func (a *answers) NodeError(err *redlock.NodeError)        { a.add(err.Node) }

func (a *answers) add(node int) {
	a.mu.Lock()
	a.n[node]++
	a.mu.Unlock()
}

func (a *answers) counts() [3]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n
}

// heard returns the re-creates the observer heard of, once they number n
// or after a second: the Lock lists a re-create just before its observers
// hear of it.
func (a *answers) heard(n int) []int {
	deadline := time.Now().Add(time.Second)
	for {
		a.mu.Lock()
		got := slices.Clone(a.reacquired)
		a.mu.Unlock()
		if len(got) >= n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(time.Millisecond)
	}
}

// settled waits until every node has answered a call more than before.
func (a *answers) settled(t *testing.T, before [3]int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		now, all := a.counts(), true
		for i := range now {
			all = all && now[i] > before[i]
		}
		if all {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not every node answered in 5s: %v calls before, %v after", before, now)
		}
		time.Sleep(time.Millisecond)
	}
}

// tryLockAll is TryLock, returned once every node has answered the acquire.
func tryLockAll(t *testing.T, c *redlock.Client, a *answers, key string, ttl time.Duration) *redlock.Lock {
	t.Helper()
	before := a.counts()
	l, err := c.TryLock(t.Context(), key, ttl)
	if err != nil {
		t.Fatal(err)
	}
	a.settled(t, before)
	return l
}

// extendAll extends l and waits until every node has answered the call
// (and the Lock noted the re-creates among the answers).
func extendAll(t *testing.T, l *redlock.Lock, a *answers, ttl time.Duration) error {
	t.Helper()
	before := a.counts()
	err := l.Extend(t.Context(), ttl)
	a.settled(t, before)
	return err
}

// forget empties node i, as a restart without data does, keeping the
// connections (a real restart has the Client mark the node down until a
// probe: see extendUntil).
func forget(t *testing.T, nodes redlocktest.NodeSet, i int) {
	t.Helper()
	if err := nodes[i].Client().FlushAll(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
}

// restartEmpty restarts node i without its data and checks it lost key.
func restartEmpty(t *testing.T, nodes redlocktest.NodeSet, i int, key string) {
	t.Helper()
	if err := nodes[i].RestartEmpty(t.Context()); err != nil {
		t.Fatal(err)
	}
	if v, _, c := nodeState(t, nodes, i, key); v != "" || c != 0 {
		t.Fatalf("node %d after an empty restart: value %q, counter %d", i, v, c)
	}
}

// withAndWithout are the two Clients a test compares.
var withAndWithout = []struct {
	name      string
	reacquire bool
}{{"with the option", true}, {"without it", false}}

// TestExtendReacquiresWhereTheKeyWasLost: two of three nodes restart empty
// under a hold. With the option, Extend puts the key back on both, for the
// new TTL, with the counter at the token, and Unlock takes it off every
// node; without it, Extend says the hold is lost.
func TestExtendReacquiresWhereTheKeyWasLost(t *testing.T) {
	for _, tc := range withAndWithout {
		t.Run(tc.name, func(t *testing.T) {
			nodes := redlocktest.Nodes(t, 3)
			c := reacquireClient(t, nodes, tc.reacquire)
			ctx := t.Context()
			const key = "reacquire"
			l, err := c.TryLock(ctx, key, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			restartEmpty(t, nodes, 0, key)
			restartEmpty(t, nodes, 1, key)
			_ = err
			if !tc.reacquire {
				err := extendKnown(t, l, 2*time.Minute)
				if !errors.Is(err, redlock.ErrLockLost) {
					t.Fatalf("Extend with the key gone from 2 of 3 nodes: %v, want ErrLockLost", err)
				}
				for i := range 2 {
					if v, _, _ := nodeState(t, nodes, i, key); v != "" {
						t.Errorf("node %d holds %q: Extend re-created the key without the option", i, v)
					}
				}
				if got := l.Reacquired(); len(got) != 0 {
					t.Errorf("Reacquired() = %v without the option", got)
				}
				return
			}
			if err := extendUntil(t, l, 2*time.Minute, reacquired(l, 0, 1)); err != nil {
				t.Fatalf("Extend with the key gone from 2 of 3 nodes: %v, want it re-created", err)
			}
			for i := range 3 {
				v, pttl, counter := nodeState(t, nodes, i, key)
				if v != l.Value() {
					t.Errorf("node %d holds %q, want the hold's value", i, v)
				}
				if pttl <= time.Minute {
					t.Errorf("node %d: PTTL %v, want the extension's 2m", i, pttl)
				}
				if counter != l.Token() {
					t.Errorf("node %d: counter %d, want the token %d (healed)", i, counter, l.Token())
				}
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatalf("Unlock: %v", err)
			}
			// Unlock returns on a quorum of releases: the last node's may
			// still be on its way, and must arrive.
			for i := range 3 {
				eventually(t, time.Now().Add(10*time.Second), fmt.Sprintf("node %d's key released after Unlock", i), func() bool {
					v, _, _ := nodeState(t, nodes, i, key)
					return v == ""
				})
			}
		})
	}
}

// reacquiredSoon returns l.Reacquired(), sorted, once it has n entries or
// after a second: a re-create is noted just after its answer is counted.
func reacquiredSoon(l *redlock.Lock, n int) []int {
	deadline := time.Now().Add(time.Second)
	for {
		got := l.Reacquired()
		if len(got) >= n || time.Now().After(deadline) {
			slices.Sort(got)
			return got
		}
		time.Sleep(time.Millisecond)
	}
}

// observedClient is reacquireClient with an answers barrier, passed
// through Observers (whose parts' optional interfaces must reach them).
func observedClient(t *testing.T, nodes redlocktest.NodeSet, opts ...redlock.Option) (*redlock.Client, *answers) {
	a := &answers{}
	return reacquireClient(t, nodes, true, append(opts, redlock.WithObserver(redlock.Observers(a)))...), a
}

// TestReacquireCountsOnlyWhatItCreated: a node where another value holds
// the key refuses; it is not overwritten, and the extension succeeds only
// if the nodes that extended or re-created make a quorum.
func TestReacquireCountsOnlyWhatItCreated(t *testing.T) {
	for _, tc := range []struct {
		name    string
		taken   []int // emptied, then another value is set there
		empty   []int // emptied
		wantErr error
		want    []int // Reacquired, sorted
	}{
		{"one lost node taken, one re-created", []int{0}, []int{1}, nil, []int{1}},
		{"two lost nodes taken", []int{0, 1}, nil, redlock.ErrLockLost, nil},
		{"one lost node taken, the others hold", []int{2}, nil, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := redlocktest.Nodes(t, 3)
			c, a := observedClient(t, nodes)
			ctx := t.Context()
			const key, other = "counted", "another-holder"
			l := tryLockAll(t, c, a, key, time.Minute)
			for _, i := range append(slices.Clone(tc.taken), tc.empty...) {
				forget(t, nodes, i)
			}
			for _, i := range tc.taken {
				if err := nodes[i].Client().Set(ctx, key, other, time.Minute).Err(); err != nil {
					t.Fatal(err)
				}
			}
			err := extendAll(t, l, a, time.Minute)
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("Extend: %v, want %v", err, tc.wantErr)
			}
			if got := reacquiredSoon(l, len(tc.want)); !slices.Equal(got, tc.want) {
				t.Errorf("Reacquired() = %v, want %v", got, tc.want)
			}
			for _, i := range tc.taken {
				if v, _, c := nodeState(t, nodes, i, key); v != other || c != 0 {
					t.Errorf("node %d: value %q, counter %d; want %q untouched, no counter", i, v, c, other)
				}
			}
			for _, i := range tc.empty {
				if v, _, c := nodeState(t, nodes, i, key); v != l.Value() || c != l.Token() {
					t.Errorf("node %d: value %q, counter %d; want the hold's value and token %d", i, v, c, l.Token())
				}
			}
		})
	}
}

// reacquiredOnARefuser holds key on three nodes, node 2 of which refused
// the acquire (another value held it) and lost that value since; an
// Extend then re-created the hold's key there.
func reacquiredOnARefuser(t *testing.T, key string) (redlocktest.NodeSet, *answers, *redlock.Lock) {
	t.Helper()
	nodes := redlocktest.Nodes(t, 3)
	c, a := observedClient(t, nodes)
	ctx := t.Context()
	if err := nodes[2].Client().Set(ctx, key, "another-holder", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	l := tryLockAll(t, c, a, key, time.Minute)
	if err := nodes[2].Client().Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	if err := extendAll(t, l, a, time.Minute); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	return nodes, a, l
}

// TestReacquireOnARefuserIsUnlocked: a node that refused the acquire (it
// held another value then) and whose key is free at the Extend gets the
// hold's key; Unlock, which leaves refusers out without the option, reaches
// it.
func TestReacquireOnARefuserIsUnlocked(t *testing.T) {
	nodes, a, l := reacquiredOnARefuser(t, "refuser")
	ctx := t.Context()
	const key = "refuser"
	if got := reacquiredSoon(l, 1); !slices.Equal(got, []int{2}) {
		t.Errorf("Reacquired() = %v, want [2]", got)
	}
	if heard := a.heard(1); !slices.Equal(heard, []int{2}) {
		t.Errorf("the ReacquireObserver heard %v, want [2]", heard)
	}
	if v, _, counter := nodeState(t, nodes, 2, key); v != l.Value() || counter != l.Token() {
		t.Errorf("node 2: value %q counter %d, want the hold's value and token %d", v, counter, l.Token())
	}
	before := a.counts()
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	a.settled(t, before)
	for i := range 3 {
		if v, _, _ := nodeState(t, nodes, i, key); v != "" {
			t.Errorf("node %d still holds %q after Unlock", i, v)
		}
	}
}

// TestReacquireNeverLowersTheCounter: a re-create lifts the counter to the
// token, never below what the node has.
func TestReacquireNeverLowersTheCounter(t *testing.T) {
	nodes := redlocktest.Nodes(t, 3)
	c, a := observedClient(t, nodes)
	ctx := t.Context()
	const key = "higher"
	l := tryLockAll(t, c, a, key, time.Minute)
	forget(t, nodes, 0)
	high := l.Token() + 1000
	if err := nodes[0].Client().Set(ctx, redlock.FenceKey(key), high, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := extendAll(t, l, a, time.Minute); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	if v, _, counter := nodeState(t, nodes, 0, key); v != l.Value() || counter != high {
		t.Errorf("node 0: value %q counter %d, want the hold's value and the counter left at %d", v, counter, high)
	}
}

// TestReacquireRefusesAForeignCounter: a fence counter that is not a
// number fails that node's call before anything is written.
func TestReacquireRefusesAForeignCounter(t *testing.T) {
	nodes := redlocktest.Nodes(t, 3)
	c, a := observedClient(t, nodes)
	ctx := t.Context()
	const key = "foreign"
	l := tryLockAll(t, c, a, key, time.Minute)
	forget(t, nodes, 0)
	if err := nodes[0].Client().Set(ctx, redlock.FenceKey(key), "not-a-number", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := extendAll(t, l, a, time.Minute); err != nil {
		t.Fatalf("Extend (two nodes still hold it): %v", err)
	}
	if v, err := nodes[0].Client().Get(ctx, key).Result(); !errors.Is(err, redis.Nil) {
		t.Errorf("node 0 holds %q (%v): the key was written before the counter was checked", v, err)
	}
	if got := l.Reacquired(); len(got) != 0 {
		t.Errorf("Reacquired() = %v, want none", got)
	}
}

// TestReacquireOnlyWithinValidity: past Until, an Extend with the option
// sends nothing and says the hold is lost, so no key comes back.
func TestReacquireOnlyWithinValidity(t *testing.T) {
	nodes := redlocktest.Nodes(t, 3)
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	c, a := observedClient(t, nodes, redlock.WithClock(clk))
	ctx := t.Context()
	const key = "late"
	l := tryLockAll(t, c, a, key, time.Minute)
	for i := range 3 {
		forget(t, nodes, i)
	}
	clk.Advance(l.Until().Sub(clk.Now()))
	before := a.counts()
	if err := l.Extend(ctx, time.Minute); !errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("Extend at Until: %v, want ErrLockLost", err)
	}
	// Another key's acquire, answered by every node: the calls an Extend
	// had sent would have been answered by then too, or soon after.
	tryLockAll(t, c, a, "another", time.Minute)
	after := a.counts()
	for i := range after {
		if after[i] != before[i]+1 {
			t.Errorf("node %d answered %d calls, want 1 (the other key's acquire): the Extend past the validity sent calls", i, after[i]-before[i])
		}
	}
	select {
	case <-l.Done():
	default:
		t.Error("Done still open after the Extend past the validity")
	}
	for i := range 3 {
		if v, _, _ := nodeState(t, nodes, i, key); v != "" {
			t.Errorf("node %d holds %q: a key re-created past the validity", i, v)
		}
	}
}

// TestRollingRestartsUnderAnAutoExtendedHold: the nodes restart empty one
// at a time, each once the hold re-created its key on the one before. With
// the option the hold survives every restart; without it, Done closes once
// a quorum of its nodes has lost the key, by the validity the last
// extension gave.
func TestRollingRestartsUnderAnAutoExtendedHold(t *testing.T) {
	for _, tc := range withAndWithout {
		t.Run(tc.name, func(t *testing.T) {
			nodes := redlocktest.Nodes(t, 3)
			c := reacquireClient(t, nodes, tc.reacquire)
			ctx := t.Context()
			const key = "rolling"
			// The TTL gives the watchdog (every third of it) room for a few
			// node timeouts of a loaded machine.
			ttl := 30 * redistest.PingRTT(t, nodes.Clients())
			ttl = max(ttl, 600*time.Millisecond)
			l, err := c.TryLock(ctx, key, ttl, redlock.AutoExtend())
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = l.Unlock(context.WithoutCancel(ctx)) }()
			for round := range 6 {
				i := round % 3
				restartEmpty(t, nodes, i, key)
				if !tc.reacquire && round == 1 {
					// Two of three lost the key: the next extension is
					// refused by a quorum, at the latest by Until.
					wait := l.TTL() + ttl
					select {
					case <-l.Done():
					case <-time.After(wait):
						t.Fatalf("Done still open %v after two of three nodes lost the key", wait)
					}
					if err := l.Extend(ctx, ttl); !errors.Is(err, redlock.ErrLockLost) {
						t.Errorf("Extend after the loss: %v, want ErrLockLost", err)
					}
					return
				}
				if tc.reacquire {
					awaitReacquired(t, l, i, round, 20*ttl)
				}
			}
			select {
			case <-l.Done():
				t.Fatal("the hold was lost across the rolling restarts")
			default:
			}
			if l.TTL() <= 0 {
				t.Errorf("TTL %v after the restarts, want validity left", l.TTL())
			}
			for i := range 3 {
				if v, _, counter := nodeState(t, nodes, i, key); v != l.Value() || counter != l.Token() {
					t.Errorf("node %d: value %q counter %d, want the hold's value and token %d", i, v, counter, l.Token())
				}
			}
		})
	}
}

// awaitReacquired waits until l's re-creates number more than round and the
// last one is node i: the key is back where it was lost.
func awaitReacquired(t *testing.T, l *redlock.Lock, i, round int, bound time.Duration) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		got := l.Reacquired()
		if len(got) > round && got[len(got)-1] == i {
			return
		}
		select {
		case <-l.Done():
			t.Fatalf("hold lost after node %d restarted (re-creates so far %v)", i, got)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %d not re-created within %v (re-creates so far %v)", i, bound, got)
		}
		time.Sleep(time.Millisecond)
	}
}
