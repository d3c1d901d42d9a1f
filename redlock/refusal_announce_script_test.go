package redlock_test

import (
	"context"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/clock"
	"github.com/fencedlock/fencedlock/redlock"
)

// TestARefusalAnnouncesOnlyAFirstWaiterChangedWithTheKeyFree runs
// acquire.lua by hand, as a Client sends it, and reads what it published:
// a refusal announces exactly when its entry changed the node's first
// waiter and the key is absent (docs/protocol.md, Claim 5). A key that is
// held (with a TTL or without one) will be released, and that release is
// announced: an announcement now would wake a head whose try the node
// refuses.
func TestARefusalAnnouncesOnlyAFirstWaiterChangedWithTheKeyFree(t *testing.T) {
	const (
		a, b     = "aaaaaaaa", "bbbbbbbb"
		departed = 1000 // A's waiter that left, its withdraw not arrived
		older    = 1500 // B's waiter
		younger  = 2000 // A's next waiter, the refused caller
		value    = "00000000-0000-7000-8000-0000aaaaaaaa"
	)
	type entry struct {
		member string
		since  int64
	}
	for _, tc := range []struct {
		name    string
		entries []entry
		hold    func(ctx context.Context, rc redis.UniversalClient, key string) error // nil: the key is free
		want    []string                                                              // channel suffix (Client id) and message, in pairs
	}{
		{name: "free, the refused caller becomes first",
			entries: []entry{{a, departed}},
			want:    []string{a, value + " 2000 " + a}},
		{name: "free, another Client becomes first",
			entries: []entry{{a, departed}, {b, older}},
			want:    []string{b, value + " 1500 " + b}},
		{name: "free, another Client was and stays first",
			entries: []entry{{b, older}}},
		{name: "held with a TTL",
			entries: []entry{{a, departed}},
			hold: func(ctx context.Context, rc redis.UniversalClient, key string) error {
				return rc.Set(ctx, key, "other", time.Hour).Err()
			}},
		{name: "held without expiry",
			entries: []entry{{a, departed}},
			hold: func(ctx context.Context, rc redis.UniversalClient, key string) error {
				return rc.Set(ctx, key, "other", 0).Err()
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, 1)
			rc := r.clients[0]
			ctx := t.Context()
			const key = "refusal-announce"
			order, leases := waitKeysOf(key)
			now, err := rc.Time(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range tc.entries {
				if err := rc.ZAdd(ctx, order, redis.Z{Score: float64(e.since), Member: e.member}).Err(); err != nil {
					t.Fatal(err)
				}
				if err := rc.ZAdd(ctx, leases, redis.Z{Score: float64(now.Add(time.Hour).UnixMilli()), Member: e.member}).Err(); err != nil {
					t.Fatal(err)
				}
			}
			if tc.hold != nil {
				if err := tc.hold(ctx, rc, key); err != nil {
					t.Fatal(err)
				}
			}
			const prefix = "fencedlock:released:"
			sub := rc.PSubscribe(ctx, prefix+"*")
			defer func() { _ = sub.Close() }()
			if _, err := sub.Receive(ctx); err != nil { // the confirmation
				t.Fatal(err)
			}

			res := evalOn(t, rc, "acquire.lua", acquireKeys(key), value, 60000, younger, a, 1000, 100) // a waiter: it enters
			if got, _ := res.([]any); len(got) == 0 || got[0] != int64(0) {
				t.Fatalf("acquire.lua: %v, want a refusal", res)
			}
			// The node runs commands in order: a marker published after
			// the script comes after anything the script published.
			const marker = "marker"
			if err := rc.Publish(ctx, prefix+"marker:"+key, marker).Err(); err != nil {
				t.Fatal(err)
			}
			var got []string
			for {
				m, err := sub.ReceiveMessage(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if m.Payload == marker {
					break
				}
				got = append(got, m.Channel[len(prefix):len(m.Channel)-len(":"+key)], m.Payload)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("published %q, want %q", got, tc.want)
			}
		})
	}
}

// TestARefusedHeadThatIsFirstWakesWithoutPubSub: the head's own try is
// refused where its Client's departed entry (a waiter that left, its
// withdraw not arrived) was first with the key free; its entry replaced
// that one, and the node would now grant it. Every reply says so (the key
// free, the first waiter the head itself), and the node's pub/sub
// announcement of that change is lossy (a connection dropped and not yet
// back): the head counts the reply too (attempt.freesForCaller).
// Here the Client's pub/sub connections are cut for the moment of the try,
// and their reconnects held back until it is over: the announcements are
// lost; counting the announcements alone, the head slept out its backoff
// (an hour, on a fake clock that does not move) with the key free and
// itself first on every node, though every reply told it. An announcement
// to another Client has no such reply to fall back on; this one does.
func TestARefusedHeadThatIsFirstWakesWithoutPubSub(t *testing.T) {
	r := newRig(t, 3)
	gate := &dialGate{open: make(chan struct{})}
	close(gate.open)
	fake := clock.NewFake(epoch)
	c, err := redlock.New(hookedNodes(t, r, gate), redlock.WithClock(fake), redlock.WithRetry(fixedBackoff(time.Hour)),
		redlock.WithNodeTimeout(max(250*time.Millisecond, 100*r.rtt)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	id := clientID(t, c)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	waitOnce(ctx, t, r, c, fake, id, "k")

	// The departed waiter's entry, a second older; the key free. The
	// Client's pub/sub connections cut, their reconnects held.
	r.enterByHand(t, "k", id, epoch.Add(-time.Second))
	gate.close()
	defer gate.reopen()
	channel := "fencedlock:released:" + id + ":k"
	for i, rc := range r.clients {
		if err := rc.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		if n, err := rc.PubSubNumSub(ctx, channel).Result(); err != nil || n[channel] != 0 {
			t.Fatalf("node %d: %v subscribers (%v)", i, n[channel], err)
		}
	}
	got := startLock(ctx, c, "k", time.Minute)
	// Refused and asleep, or already through: counting its replies, the
	// head may wake and take the key before the test looks (its sleep's
	// timer then comes and goes unseen).
	asleep := make(chan error, 1)
	go func() { asleep <- fake.BlockUntilContext(ctx, 1) }()
	var res lockResult
	ok := true
	select {
	case err := <-asleep:
		if err != nil {
			t.Fatal(err)
		}
		r.awaitWaiting(t, "k", id)
		gate.reopen()
		res, ok = awaitLock(t, got, 10*time.Second)
	case res = <-got: // with pub/sub still cut
		gate.reopen()
	}
	if !ok {
		cancel()
		<-got
		t.Fatalf("Lock did not return within 10s with the key free and itself first on every node (fake clock at %v)", fake.Now().Sub(epoch))
	}
	if res.err != nil {
		t.Fatalf("Lock: %v", res.err)
	}
	if err := res.l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// dialGate holds back new connections while it is closed.
type dialGate struct {
	mu   sync.Mutex // protects open
	open chan struct{}
}

func (g *dialGate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open = make(chan struct{})
}

func (g *dialGate) reopen() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

func (g *dialGate) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		g.mu.Lock()
		open := g.open
		g.mu.Unlock()
		select {
		case <-open:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return next(ctx, network, addr)
	}
}
func (g *dialGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (g *dialGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
