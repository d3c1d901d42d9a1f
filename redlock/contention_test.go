package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/internal/redistest"
	"github.com/fencedlock/fencedlock/redlock"
)

// Separate Clients (as separate processes) contending for one key: the
// key keeps moving, each Client gets its share in the order the rule
// gives (docs/protocol.md, Claim 6), and a release wakes only the waiter
// it names.

// separateClients returns k Clients on r's nodes, each with redis clients
// of its own, as k processes would have.
func separateClients(t *testing.T, r *rig, k int, nodeTimeout time.Duration, opts ...redlock.Option) []*redlock.Client {
	t.Helper()
	clients := make([]*redlock.Client, k)
	for i := range clients {
		clients[i] = newProcess(t, r, nodeTimeout, nil, opts...)
	}
	return clients
}

// newProcess is a Client on r's nodes with redis clients of its own, as a
// separate process would have; asks (when not nil) counts its attempts.
func newProcess(t *testing.T, r *rig, nodeTimeout time.Duration, asks *askCounter, opts ...redlock.Option) *redlock.Client {
	t.Helper()
	nodes := make([]redis.UniversalClient, len(r.procs))
	for j, p := range r.procs {
		c := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, DialTimeout: nodeTimeout,
			ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = c.Close() })
		if asks != nil {
			c.AddHook(asks.hook())
		}
		nodes[j] = c
		if p.Running() && !p.Paused() {
			warm(t, c, nodeTimeout)
		}
	}
	c, err := redlock.New(nodes, append([]redlock.Option{redlock.WithNodeTimeout(nodeTimeout)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// warm dials c before anything is timed: on a loaded machine a dial and its
// handshake can take longer than a short node timeout, and a run that
// starts with every client dialling spends its time failing to.
func warm(t *testing.T, c *redis.Client, nodeTimeout time.Duration) {
	t.Helper()
	for range 50 {
		ctx, cancel := context.WithTimeout(t.Context(), 4*nodeTimeout)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
	}
	t.Logf("%s: no connection after 50 tries", c.Options().Addr)
}

// askCounter counts the acquire calls that nodes answered: acquire.lua is
// the script with four keys (the key, its fence counter and its waiting
// set) and five arguments (raise.lua has the keys, not the arguments). A
// reply NOSCRIPT is asked again, and counted then.
type askCounter struct{ n atomic.Int64 }

func (a *askCounter) hook() redistest.AfterReply {
	return func(cmds ...redis.Cmder) {
		for _, cmd := range cmds {
			args := cmd.Args()
			if len(args) != 3+4+6 || (args[0] != "evalsha" && args[0] != "eval") || fmt.Sprint(args[2]) != "4" {
				continue
			}
			if err := cmd.Err(); err == nil || !redis.HasErrorPrefix(err, "NOSCRIPT") {
				a.n.Add(1)
			}
		}
	}
}

// perNode is the attempts: every attempt asks each of n nodes once (a
// split vote's winner asks some again).
func (a *askCounter) perNode(n int) float64 { return float64(a.n.Load()) / float64(n) }

// cmdCalls sums a command's calls on the nodes (inside scripts too) since
// their stats were last reset.
func cmdCalls(t *testing.T, r *rig, cmd string) int64 {
	t.Helper()
	var n int64
	for i, c := range r.clients {
		info, err := c.Info(t.Context(), "commandstats").Result()
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		for line := range strings.Lines(info) {
			if rest, ok := strings.CutPrefix(line, "cmdstat_"+cmd+":calls="); ok {
				v, _, _ := strings.Cut(rest, ",")
				k, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					t.Fatalf("node %d: %q: %v", i, line, err)
				}
				n += k
			}
		}
	}
	return n
}

func resetStats(t *testing.T, r *rig) {
	t.Helper()
	for i, c := range r.clients {
		if err := c.ConfigResetStat(t.Context()).Err(); err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
	}
}

type contention struct {
	holds, timedOut int64
	perClient       []int64
}

// contend has the Clients loop Lock, hold for hold, Unlock on one key for
// d, and counts the holds granted, per client too, and the Lock calls that
// gave up after lockTimeout.
func contend(t *testing.T, clients []*redlock.Client, ttl, lockTimeout, hold, d time.Duration) contention {
	t.Helper()
	var (
		ok, bad atomic.Int64
		inside  atomic.Int32
		wg      sync.WaitGroup
	)
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	per := make([]atomic.Int64, len(clients))
	for id, c := range clients {
		wg.Go(func() {
			for ctx.Err() == nil {
				lctx, lcancel := context.WithTimeout(ctx, lockTimeout)
				l, err := c.Lock(lctx, "hot", ttl)
				lcancel()
				if err != nil {
					if ctx.Err() == nil {
						bad.Add(1)
					}
					if !errors.Is(err, redlock.ErrNotAcquired) {
						t.Errorf("Lock: %v", err)
						return
					}
					continue
				}
				if inside.Add(1) > 1 {
					t.Error("two holders at once")
				}
				ok.Add(1)
				per[id].Add(1)
				time.Sleep(hold) // the critical section
				inside.Add(-1)
				_ = l.Unlock(context.WithoutCancel(ctx))
			}
		})
	}
	wg.Wait()
	out := contention{holds: ok.Load(), timedOut: bad.Load(), perClient: make([]int64, len(clients))}
	for i := range per {
		out.perClient[i] = per[i].Load()
	}
	return out
}

// K separate Clients contending on one key keep being granted it, with all
// nodes up and with a minority of nodes killed or frozen: waiters in
// different processes must not split the nodes' votes for ever, and none of
// them may starve. The bar is set by what one client alone gets in the same
// run, on the same nodes.
func TestContendingClientsWithNodeDown(t *testing.T) {
	for _, fault := range []string{"healthy", "killed", "paused"} {
		t.Run(fault, func(t *testing.T) {
			r := newRig(t, 5)
			// The node timeout and TTL scale with this run's round trip, so
			// that a loaded machine is measured against itself.
			rtt := redistest.PingRTT(t, r.clients)
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
			// One client alone is measured for a quarter as long as the K
			// (its rate is steady; the K need the time for every one of
			// them to get the key). The K must keep a twentieth of its rate.
			const k, d, hold = 6, 2 * time.Second, time.Millisecond
			nodeTimeout := max(50*time.Millisecond, 20*rtt)
			ttl := 6 * nodeTimeout
			one := contend(t, separateClients(t, r, 1, nodeTimeout), ttl, 2*ttl, hold, d/4)
			many := contend(t, separateClients(t, r, k, nodeTimeout), ttl, 2*ttl, hold, d)
			t.Logf("%s (rtt %v): 1 client: %d holds in %v; %d clients: %d holds in %v, %d Locks timed out after %v, per client %v",
				fault, rtt, one.holds, d/4, k, many.holds, d, many.timedOut, 2*ttl, many.perClient)
			if many.holds < max(int64(k), one.holds/5) {
				t.Errorf("%d clients got %d holds in %v, one client alone %d in %v: the lock stalls under contention",
					k, many.holds, d, one.holds, d/4)
			}
			for i, n := range many.perClient {
				if n == 0 {
					t.Errorf("client %d starved: no hold in %v", i, d)
				}
			}
		})
	}
}

// A release wakes only the waiter it names, the first of the waiting set,
// not every process's head. Counted on the Clients: K separate Clients of
// one goroutine each loop on one key, with a backoff that never runs out
// during the run, so that only releases move the waiters. By the rule a
// hold costs two attempts: the named head's, which takes the key, and the
// releaser's next Lock, which tries at once to enter its place (refused).
// Add, per Client, the first Lock's try again once subscribed, and the
// start's split votes (every Client asks the free key at once: about one
// failed attempt each). A herd would cost about K attempts per hold.
func TestReleaseWakesOnlyTheHead(t *testing.T) {
	r := newRig(t, 5)
	rtt := measureRTT(t, r.clients)
	const k, hold = 8, time.Millisecond
	d := max(1500*time.Millisecond, 500*rtt)
	nodeTimeout := max(50*time.Millisecond, 20*rtt)
	ttl := 6 * nodeTimeout
	asks := &askCounter{}
	clients := make([]*redlock.Client, k)
	for i := range clients {
		clients[i] = newProcess(t, r, nodeTimeout, asks, redlock.WithRetry(fixedBackoff(time.Hour)))
	}
	asks.n.Store(0) // the warm-ups are not the run's
	got := contend(t, clients, ttl, 4*ttl, hold, d)
	attempts := asks.perNode(len(r.procs))
	t.Logf("%d clients, %d holds in %v (per client %v), %d Locks gave up after %v: %.0f attempts, %.2f per hold",
		k, got.holds, d, got.perClient, got.timedOut, 4*ttl, attempts, attempts/float64(max(got.holds, 1)))
	if got.holds < 4*k {
		t.Fatalf("%d holds: too few to judge", got.holds)
	}
	if bound := float64(2*got.holds + 3*k); attempts > bound {
		t.Errorf("%.0f attempts for %d holds among %d processes, want at most %.0f: a release wakes more than the head it names",
			attempts, got.holds, k, bound)
	}
	if got.timedOut > 0 {
		t.Errorf("%d Locks waited %v in vain, with every release announced: a wake-up was lost", got.timedOut, 4*ttl)
	}
}

// acquisition is one hold in a contention run: who took it, and when its
// waiter began to wait (the first 48 bits of its value, in ms).
type acquisition struct {
	client, goroutine int
	token             uint64
	since             int64
}

func sinceOf(t *testing.T, value string) int64 {
	t.Helper()
	ms, err := strconv.ParseInt(strings.ReplaceAll(value, "-", "")[:12], 16, 64)
	if err != nil {
		t.Fatalf("hold value %q: %v", value, err)
	}
	return ms
}

// Per-Client fairness (Claim 6 under contention): K separate Clients of
// two goroutines each loop Lock, a short hold, Unlock on one key, until
// the Clients held it n times in all. Waiters are served by wait start, so
// the key goes round: each Client gets its share, within half again of the
// least served. And no Client holds it more than twice in a row: a
// goroutine that just released waits again from then, after every other
// Client's waiters, which are older; only its Client's other goroutine may
// come before them, if it began to wait before they did. A third hold in a
// row would need every other Client's head to be off the nodes at once.
func TestClientsShareTheKeyFairly(t *testing.T) {
	r := newRig(t, 3)
	rtt := measureRTT(t, r.clients)
	const k, goroutines, perClient, hold = 6, 2, 20, time.Millisecond
	n := k * perClient
	nodeTimeout := roomyNodeTimeout(rtt)
	ttl := 6 * nodeTimeout
	clients := separateClients(t, r, k, nodeTimeout)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var (
		mu    sync.Mutex // protects holds
		holds []acquisition
		wg    sync.WaitGroup
	)
	for ci, c := range clients {
		for g := range goroutines {
			wg.Go(func() {
				for ctx.Err() == nil {
					l, err := c.Lock(ctx, "fair", ttl)
					if err != nil {
						if ctx.Err() == nil {
							t.Errorf("Lock: %v", err)
						}
						return
					}
					mu.Lock()
					if len(holds) < n {
						holds = append(holds, acquisition{ci, g, l.Token(), sinceOf(t, l.Value())})
					}
					if len(holds) == n {
						cancel()
					}
					mu.Unlock()
					time.Sleep(hold) // the critical section
					_ = l.Unlock(context.WithoutCancel(ctx))
				}
			})
		}
	}
	wg.Wait()
	if len(holds) < n {
		t.Fatalf("%d holds of %d in %v", len(holds), n, 60*time.Second)
	}
	slices.SortFunc(holds, func(a, b acquisition) int { return int(a.token) - int(b.token) })
	per := make([]int, k)
	longest, run := 0, 0
	var order strings.Builder
	// Runs are judged once every Client has held the key: before, a Client
	// whose goroutines were first on the nodes may hold it again while the
	// others have not made their first try (seen under load: AAACBB...).
	seen := map[int]bool{}
	for i, h := range holds {
		per[h.client]++
		if i > 0 && holds[i-1].client == h.client {
			run++
		} else {
			run = 1
		}
		if len(seen) == k {
			longest = max(longest, run)
		}
		seen[h.client] = true
		order.WriteByte(byte('A' + h.client))
	}
	// Measured too, not judged: holds taken while a waiter that began to
	// wait earlier (by the ms of the values) took the key later. The rule
	// allows them only for a waiter not yet on the nodes: a goroutine that
	// became its Client's head as the key was taken, and whose first try
	// came after the release.
	passed := 0
	for i, h := range holds {
		for _, o := range holds[i+1:] {
			if o.client != h.client && o.since < h.since {
				passed++
				break
			}
		}
	}
	t.Logf("order %s; per client %v; longest run %d; %d of %d holds taken before an older waiter's",
		order.String(), per, longest, passed, n)
	if lo, hi := slices.Min(per), slices.Max(per); float64(hi) > 1.5*float64(lo) {
		t.Errorf("holds per client %v: the most served got %d, the least %d (bound: half again)", per, hi, lo)
	}
	if longest > goroutines {
		t.Errorf("a Client held the key %d times in a row while %d others waited (bound %d, its goroutines)", longest, k-1, goroutines)
	}
}
