package redlock_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/internal/holdproxy"
	"github.com/fencedlock/fencedlock/internal/redistest"
	"github.com/fencedlock/fencedlock/redlock"
)

// "No grant left behind, late answers included": a node that grants after
// the lock stopped waiting for it (its answer comes after the node timeout)
// holds a real grant, which must be released unless the hold is on.
//
// The late nodes sit behind a proxy that holds their answers back: the
// script runs on the server at once, and the answer reaches the client only
// when the test lets it, after the client counted the call as timed out.

// lateRig is n real nodes, those in late behind a holdproxy.
type lateRig struct {
	direct  []*redis.Client         // straight to each server, for the test's checks
	clients []redis.UniversalClient // what the lock uses
	proxies map[int]*holdproxy.Proxy
}

func newLateRig(t *testing.T, n int, late ...int) *lateRig {
	t.Helper()
	procs := redistest.StartN(t, n)
	r := &lateRig{clients: make([]redis.UniversalClient, n), proxies: map[int]*holdproxy.Proxy{}}
	for _, i := range late {
		p, err := holdproxy.Start(procs[i].Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		r.proxies[i] = p
	}
	for i, p := range procs {
		r.direct = append(r.direct, redistest.Client(t, p))
		addr := p.Addr()
		if px := r.proxies[i]; px != nil {
			addr = px.Addr()
		}
		// As in newRig: go-redis defaults, no ContextTimeoutEnabled, so a
		// call outlives its deadline and its late answer comes through.
		// ReadTimeout well above how long the test holds an answer.
		c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, ReadTimeout: time.Minute})
		t.Cleanup(func() { _ = c.Close() })
		r.clients[i] = c
	}
	return r
}

// client returns a lock client over the rig. Held answers are let through
// at the end of the test, before the client closes.
func (r *lateRig) client(t *testing.T, opts ...redlock.Option) *redlock.Client {
	t.Helper()
	c, err := redlock.New(r.clients, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	t.Cleanup(r.release)
	return c
}

// hold makes the late nodes' answers wait in their proxies. A lock and an
// unlock of another key come first, so that each node has a connection open
// and the lock's scripts loaded: a held handshake, or a held NOSCRIPT answer
// to EVALSHA, would keep the script from ever running.
func (r *lateRig) hold(t *testing.T, c *redlock.Client) {
	t.Helper()
	l, err := c.TryLock(t.Context(), "late:warm-up", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	for i := range r.proxies {
		eventually(t, time.Now().Add(time.Minute), "warm-up released everywhere", func() bool {
			return r.direct[i].Exists(t.Context(), "late:warm-up").Val() == 0
		})
	}
	for _, p := range r.proxies {
		p.Hold()
	}
}

// releaseAt lets the held answers through at the given time: that is how
// late they come. A wait for the fault's duration, not synchronisation.
func (r *lateRig) releaseAt(at time.Time) time.Time {
	time.Sleep(time.Until(at))
	r.release()
	return time.Now()
}

func (r *lateRig) release() {
	for _, p := range r.proxies {
		p.Release()
	}
}

// awaitLateGrant waits until node i ran the acquire script for key and
// granted it (its INCR of the fence counter is the witness), with the answer
// still held in the proxy. It returns the value the node holds.
func (r *lateRig) awaitLateGrant(t *testing.T, i int, key string, deadline time.Time) string {
	t.Helper()
	ctx := t.Context()
	var v string
	eventually(t, deadline, fmt.Sprintf("node %d granted %q with its answer held", i, key), func() bool {
		if r.direct[i].Get(ctx, redlock.FenceKey(key)).Val() != "1" || r.proxies[i].Held() == 0 {
			return false
		}
		v = r.direct[i].Get(ctx, key).Val()
		return v != ""
	})
	return v
}

// awaitGone waits until none of nodes holds key.
func (r *lateRig) awaitGone(t *testing.T, key string, nodes []int, deadline time.Time) {
	t.Helper()
	eventually(t, deadline, fmt.Sprintf("key %q gone from nodes %v", key, nodes), func() bool {
		for _, i := range nodes {
			if r.direct[i].Exists(t.Context(), key).Val() != 0 {
				return false
			}
		}
		return true
	})
}

// lateSetup is what the late-grant tests share: the node timeout, a ttl that
// would keep a grant left behind far past the test's bounds, and how long a
// release may take once an answer came.
type lateSetup struct {
	nodeTimeout, ttl, releaseWithin time.Duration
	// lateBy is how long after the attempt's start the held answers come:
	// past the attempt's own deadline, and past that of any release the
	// client queued for the node when it gave up on it (a release that
	// goes out behind the grant is not the late path this is about).
	lateBy time.Duration
	within time.Duration // for what takes a few node timeouts
}

func newLateSetup(t *testing.T, r *lateRig) lateSetup {
	t.Helper()
	nt := roomyNodeTimeout(measureRTT(t, r.clients))
	// within bounds the waits for events that must come (a grant, a
	// timeout): generous, far under the ttl; a loaded machine once took
	// longer than ten node timeouts to pass a request through the proxy.
	// Once the late answer is in, its release is one call: it lands within
	// its node timeout or not at all. Twice that, plus the answer's own
	// trip; a grant left behind would stay for the whole ttl.
	return lateSetup{nodeTimeout: nt, ttl: 100 * nt, releaseWithin: 3 * nt, lateBy: 5 * nt, within: 40 * nt}
}

func TestLateGrantOfFailedAttemptIsReleased(t *testing.T) {
	r := newLateRig(t, 3, 1, 2)
	s := newLateSetup(t, r)
	rec := newEventLog()
	c := r.client(t, redlock.WithNodeTimeout(s.nodeTimeout), redlock.WithObserver(rec))
	ctx := t.Context()
	const key = "late:failed"
	// Someone else holds the key on node 0; nodes 1 and 2 will grant, but
	// too late: the attempt fails.
	if err := r.direct[0].Set(ctx, key, "someone-else", s.ttl).Err(); err != nil {
		t.Fatal(err)
	}
	r.hold(t, c)
	start := time.Now()
	_, err := c.TryLock(ctx, key, s.ttl)
	if !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("TryLock: %v, want ErrNotAcquired", err)
	}
	for _, i := range []int{1, 2} {
		r.awaitLateGrant(t, i, key, start.Add(s.within))
		// The answer comes only after the lock gave up on it.
		rec.await(t, start.Add(s.within), fmt.Sprintf("node %d timed out", i), nodeErrorOf(i))
	}
	answered := r.releaseAt(start.Add(s.lateBy))
	r.awaitGone(t, key, []int{1, 2}, answered.Add(s.releaseWithin))
	t.Logf("late grants released %v after their answers were let through", time.Since(answered))
	if v := r.direct[0].Get(ctx, key).Val(); v != "someone-else" {
		t.Fatalf("the other holder's key on node 0 is %q", v)
	}
}

func TestLateGrantAfterUnlockIsReleased(t *testing.T) {
	r := newLateRig(t, 5, 3, 4)
	s := newLateSetup(t, r)
	rec := newEventLog()
	c := r.client(t, redlock.WithNodeTimeout(s.nodeTimeout), redlock.WithObserver(rec))
	ctx := t.Context()
	const key = "late:unlocked"
	r.hold(t, c)
	start := time.Now()
	l, err := c.TryLock(ctx, key, s.ttl) // nodes 0-2 are a quorum
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{3, 4} {
		if v := r.awaitLateGrant(t, i, key, start.Add(s.within)); v != l.Value() {
			t.Fatalf("node %d holds %q, want this hold's %q", i, v, l.Value())
		}
	}
	// Unlocked while nodes 3 and 4 have not answered yet.
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{3, 4} {
		rec.await(t, start.Add(s.within), fmt.Sprintf("node %d timed out", i), nodeErrorOf(i))
	}
	if n := r.direct[3].Exists(ctx, key).Val() + r.direct[4].Exists(ctx, key).Val(); n != 2 {
		t.Logf("%d of the 2 late grants were already released before their answers came", 2-n)
	}
	answered := r.releaseAt(start.Add(s.lateBy))
	r.awaitGone(t, key, []int{0, 1, 2, 3, 4}, answered.Add(s.releaseWithin))
	t.Logf("late grants released %v after their answers were let through", time.Since(answered))
}

func TestLateGrantWhileHeldIsReleasedByUnlock(t *testing.T) {
	r := newLateRig(t, 5, 3, 4)
	s := newLateSetup(t, r)
	rec := newEventLog()
	c := r.client(t, redlock.WithNodeTimeout(s.nodeTimeout), redlock.WithObserver(rec))
	ctx := t.Context()
	const key = "late:held"
	r.hold(t, c)
	start := time.Now()
	l, err := c.TryLock(ctx, key, s.ttl)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{3, 4} {
		r.awaitLateGrant(t, i, key, start.Add(s.within))
		rec.await(t, start.Add(s.within), fmt.Sprintf("node %d timed out", i), nodeErrorOf(i))
	}
	// The late answers arrive while the hold is on: they are real grants
	// of this hold, and Unlock must reach them too.
	r.releaseAt(start.Add(s.lateBy))
	eventually(t, start.Add(s.within), "held answers passed on", func() bool {
		return r.proxies[3].Held()+r.proxies[4].Held() == 0
	})
	unlocked := time.Now()
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	r.awaitGone(t, key, []int{0, 1, 2, 3, 4}, unlocked.Add(s.releaseWithin))
}
