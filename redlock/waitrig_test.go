package redlock_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/clock"
	"github.com/fencedlock/fencedlock/redlock"
)

// The rig of the waiting tests: Lock calls in the background, the key's
// waiting set on each node read and awaited, holds and releases made by
// hand where a test needs one at a chosen moment, as another process's
// would be.

// fixedBackoff always waits d: no jitter that could retry early by chance.
type fixedBackoff time.Duration

func (f fixedBackoff) Backoff(int) (time.Duration, bool) { return time.Duration(f), true }

type lockResult struct {
	l   *redlock.Lock
	err error
	at  time.Time // when Lock returned
}

// startLock runs c.Lock(ctx, key, ttl, opts...) in the background.
func startLock(ctx context.Context, c *redlock.Client, key string, ttl time.Duration, opts ...redlock.LockOption) <-chan lockResult {
	got := make(chan lockResult, 1)
	go func() {
		l, err := c.Lock(ctx, key, ttl, opts...)
		got <- lockResult{l, err, time.Now()}
	}()
	return got
}

// waitKeys are the keys of key's waiting set on a node, named as slot.go
// names them: its order (score: wait start in ms; member: Client id) and
// its leases (score: lease end in ms on the node's clock).
func waitKeys(key string) (order, leases string) {
	tag := strings.TrimPrefix(redlock.FenceKey(key), "fencedlock:fence:")
	return "fencedlock:wait:" + tag + ":" + key, "fencedlock:lease:" + tag + ":" + key
}

// waiting is key's waiting set on node i, oldest first, as release.lua
// announces its head: "since id".
func (r *rig) waiting(t *testing.T, i int, key string) []string {
	t.Helper()
	order, _ := waitKeys(key)
	zs, err := r.clients[i].ZRangeWithScores(t.Context(), order, 0, -1).Result()
	if err != nil {
		t.Fatalf("node %d: %v", i, err)
	}
	var out []string
	for _, z := range zs {
		out = append(out, fmt.Sprintf("%d %s", int64(z.Score), z.Member))
	}
	return out
}

// awaitWaiting polls until key's waiting set on every running node holds
// exactly the Clients ids, in that order (bounded).
func (r *rig) awaitWaiting(t *testing.T, key string, ids ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for i, p := range r.procs {
		if !p.Running() {
			continue
		}
		for {
			var got []string
			for _, w := range r.waiting(t, i, key) {
				got = append(got, w[strings.IndexByte(w, ' ')+1:])
			}
			if slices.Equal(got, ids) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d: waiting for %q: %v, want %v", i, key, got, ids)
			}
			time.Sleep(time.Millisecond) // polling the node
		}
	}
}

// clientID is c's id, the member of its entries in waiting sets: the
// last 8 characters of its hold values.
func clientID(t *testing.T, c *redlock.Client) string {
	t.Helper()
	l := setupHold(t, c, fmt.Sprintf("client-id-%p", c))
	if err := l.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	return l.Value()[len(l.Value())-8:]
}

// holdByHand makes key held on every node by value, as another process's
// hold would be.
func (r *rig) holdByHand(t *testing.T, key, value string) {
	t.Helper()
	for _, rc := range r.clients {
		if err := rc.Set(t.Context(), key, value, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// dropByHand deletes key on every node without a word: a hold that
// expired, or whose release was never heard.
func (r *rig) dropByHand(t *testing.T, key string) {
	t.Helper()
	for i, rc := range r.clients {
		if err := rc.Del(t.Context(), key).Err(); err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
	}
}

// releaseByHand deletes key on node i and announces the release there as
// release.lua does: the first waiter ("since id"), or "" for none.
func (r *rig) releaseByHand(t *testing.T, i int, key string) {
	t.Helper()
	rc := r.clients[i]
	if err := rc.Del(t.Context(), key).Err(); err != nil {
		t.Fatal(err)
	}
	head := ""
	if w := r.waiting(t, i, key); len(w) > 0 {
		head = w[0]
	}
	r.announce(t, i, key, head)
}

// announce announces on node i, as release.lua does, a release of key
// whose first waiter is head ("since id", "" for none; or any odd text): to
// every Client that listens for key's releases there, with a released
// value of its own, so that no two announcements count as one.
func (r *rig) announce(t *testing.T, i int, key, head string) {
	t.Helper()
	if err := announceTo(t.Context(), r.clients[i], key, head); err != nil {
		t.Fatalf("node %d: %v", i, err)
	}
}

// announced numbers the released values of the test's announcements.
var announced atomic.Int64

// announceTo is announce on the node rc.
func announceTo(ctx context.Context, rc redis.UniversalClient, key, head string) error {
	msg := strings.TrimSpace(fmt.Sprintf("by-hand-%d %s", announced.Add(1), head))
	for _, ch := range subscribedAs(ctx, rc, "fencedlock:released:"+key) {
		if err := rc.Publish(ctx, ch, msg).Err(); err != nil {
			return err
		}
	}
	return nil
}

// subscribedAs resolves channel: a key's release channel named as before
// Clients had one each ("fencedlock:released:KEY") stands for the channels
// of the Clients subscribed to KEY's releases on rc
// ("fencedlock:released:ID:KEY"); any other channel is itself.
func subscribedAs(ctx context.Context, rc redis.UniversalClient, channel string) []string {
	key, ok := strings.CutPrefix(channel, "fencedlock:released:")
	if !ok {
		return []string{channel}
	}
	pattern := "fencedlock:released:????????:" + globEscaper.Replace(key)
	var (
		mu  sync.Mutex
		chs []string
	)
	each := func(ctx context.Context, c *redis.Client) error {
		found := c.PubSubChannels(ctx, pattern).Val()
		mu.Lock()
		chs = append(chs, found...)
		mu.Unlock()
		return nil
	}
	eachServer(ctx, rc, each)
	slices.Sort(chs)
	return slices.Compact(chs)
}

// globEscaper escapes the characters a PUBSUB CHANNELS pattern gives a
// meaning to.
var globEscaper = strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`)

// waitForSubscriber polls PUBSUB NUMSUB until someone listens for key's
// releases on node 0 (a condition with a deadline, not a sleep).
func waitForSubscriber(t *testing.T, r *rig, key string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if len(subscribedAs(t.Context(), r.clients[0], "fencedlock:released:"+key)) > 0 {
			return
		}
		time.Sleep(time.Millisecond) // polling a server-side condition
	}
	t.Fatal("no waiter subscribed")
}

// asleepOnFake starts c.Lock of key (held by someone else) and returns once
// the waiter was refused, is registered on every node and sleeps its
// backoff on fake; its outcome comes on the channel.
func asleepOnFake(ctx context.Context, t *testing.T, r *rig, c *redlock.Client, fake *clock.Fake, key string) <-chan lockResult {
	t.Helper()
	clientID(t, c) // dials and loads the scripts: its first try is not the one that times out on a loaded machine
	got := startLock(ctx, c, key, 10*time.Second)
	if err := fake.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	waitSubscribed(t, r.clients, "fencedlock:released:"+key)
	return got
}

// absent reports whether got stays empty for window: a bound on waiting
// for something that must not come (an early wake-up takes a round trip).
func absent(got <-chan lockResult, window time.Duration) bool {
	select {
	case <-got:
		return false
	case <-time.After(window):
		return true
	}
}

// awaitNoDialProbes waits until go-redis's dial probes for a dead node
// (pool.tryDial: a retry every second, until the pool is closed) are gone,
// so that goleak, at the end of a run of this test alone, does not count
// them. Polls the goroutines' stacks, bounded.
func awaitNoDialProbes(t *testing.T) {
	buf := make([]byte, 1<<20)
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := runtime.Stack(buf, true)
		if !strings.Contains(string(buf[:n]), "(*ConnPool).tryDial") || time.Now().After(deadline) {
			return
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, bounded
	}
}
