package redlock_test

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/fencedlock/fencedlock/internal/redisproc"
	"github.com/fencedlock/fencedlock/redlock"
)

// transitions is a slog.Handler that counts the node down / node up
// records per node, and the watchdog's failed extensions ("extension
// failed"), and lets a test wait for one.
type transitions struct {
	mu      sync.Mutex     // protects counts, changed
	counts  map[string]int // "down 2", "up 2", "extension failed"
	changed chan struct{}  // closed and replaced on every record counted
}

func newTransitions() *transitions {
	return &transitions{counts: map[string]int{}, changed: make(chan struct{})}
}

func (*transitions) Enabled(context.Context, slog.Level) bool { return true }
func (h *transitions) WithAttrs([]slog.Attr) slog.Handler     { return h }
func (h *transitions) WithGroup(string) slog.Handler          { return h }
func (h *transitions) Handle(_ context.Context, r slog.Record) error {
	var what string
	switch {
	case strings.HasPrefix(r.Message, "redlock: node down"):
		what = "down " + nodeAttr(r)
	case strings.HasPrefix(r.Message, "redlock: node up"):
		what = "up " + nodeAttr(r)
	case strings.HasPrefix(r.Message, "redlock: extension failed"):
		what = "extension failed"
	default:
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.counts[what]++
	close(h.changed)
	h.changed = make(chan struct{})
	return nil
}

// nodeAttr is the node attribute of r.
func nodeAttr(r slog.Record) string {
	node := ""
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "node" {
			node = a.Value.String()
		}
		return true
	})
	return node
}

func (h *transitions) count(what string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.counts[what]
}

// await waits until what ("down 2") was logged, and fails the test after
// the bound.
func (h *transitions) await(t testing.TB, bound time.Duration, what string) {
	t.Helper()
	if !h.within(bound, what) {
		t.Fatalf("no %q logged within %v", what, bound)
	}
}

// within waits until what was logged, and reports whether it was within
// the bound.
func (h *transitions) within(bound time.Duration, what string) bool {
	deadline := time.NewTimer(bound)
	defer deadline.Stop()
	for {
		h.mu.Lock()
		n, changed := h.counts[what], h.changed
		h.mu.Unlock()
		if n > 0 {
			return true
		}
		select {
		case <-changed:
		case <-deadline.C:
			return false
		}
	}
}

// nodeErrorsIn are the NodeErrors in err's chain.
func nodeErrorsIn(err error) []*redlock.NodeError {
	var out []*redlock.NodeError
	var walk func(error)
	walk = func(err error) {
		if ne, ok := err.(*redlock.NodeError); ok {
			out = append(out, ne)
			return
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		}
	}
	walk(err)
	return out
}

// olderThanAnyone is a hold value that sorts before every value the client
// makes (they begin with the time in hex): it wins every split vote, so a
// contender steps back at once instead of asking again.
const olderThanAnyone = "0"

// holdOn sets key to olderThanAnyone on the given nodes, for a minute.
func holdOn(t *testing.T, r *rig, key string, nodes ...int) {
	t.Helper()
	for _, i := range nodes {
		if err := r.clients[i].Set(t.Context(), key, olderThanAnyone, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// splitTry is a TryLock on key, held on node 0 by another value, that fails
// as soon as the answers allow, and how long it took.
func splitTry(t *testing.T, r *rig, c *redlock.Client, key string, ttl time.Duration, alsoHeldOn ...int) (time.Duration, error) {
	t.Helper()
	holdOn(t, r, key, append([]int{0}, alsoHeldOn...)...)
	start := time.Now()
	_, err := c.TryLock(t.Context(), key, ttl)
	took := time.Since(start)
	if !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("TryLock of %s, held on node 0: %v, want ErrNotAcquired", key, err)
	}
	return took, err
}

// TestKilledNodeCostsNothing: with the default node timeout, a killed node
// is marked down after its first failure, and then a TryLock whose outcome
// hangs on it (one node grants, one refuses, the third is the killed one)
// fails in about the round trips of the live nodes, not at the grace that
// waiting for the silent node costs (a quarter of the node timeout), nor
// at the node timeout. The transition is logged once.
func TestKilledNodeCostsNothing(t *testing.T) {
	const ttl = 10 * time.Second // the default node timeout: ttl/20 = 500ms
	const nodeTimeout = ttl / 20
	r, c, logs := defaultsRig(t)

	// The same shape with every node up, held on nodes 0 and 2: one grant,
	// two refusals, the grant released; the slowest of a few.
	var live time.Duration
	for _, key := range []string{"live-0", "live-1", "live-2", "live-3", "live-4"} {
		took, _ := splitTry(t, r, c, key, ttl, 2)
		live = max(live, took)
	}
	// The grace before a silent node is given up: what waiting for it costs
	// at the least, and what a down node must not cost.
	grace := nodeTimeout / 4
	bound := min(4*live, grace)
	t.Logf("every node up: the slowest split attempt took %v; bound %v (grace %v)", live, bound, grace)

	if err := r.procs[2].Kill(); err != nil {
		t.Fatal(err)
	}
	first, _ := splitTry(t, r, c, "first", ttl)
	t.Logf("the first attempt after the kill took %v", first)
	if !logs.within(2*nodeTimeout, "down 2") { // at its node timeout at the latest
		t.Errorf("node 2 was not logged down within %v of its first failure", 2*nodeTimeout)
	}
	for _, key := range []string{"k0", "k1", "k2", "k3", "k4"} {
		took, err := splitTry(t, r, c, key, ttl)
		if took >= bound {
			t.Errorf("%s: TryLock with node 2 down took %v, want < %v (the live nodes' round trips: %v)", key, took, bound, live)
		}
		var down *redlock.NodeError
		for _, ne := range nodeErrorsIn(err) {
			if ne.Node == 2 {
				down = ne
			}
		}
		if down == nil || !strings.Contains(down.Error(), "node down") {
			t.Errorf("%s: %v, want a NodeError of node 2 that says it is down", key, err)
		}
	}
	if n := logs.count("down 2"); n != 1 {
		t.Errorf("node 2 logged down %d times, want once", n)
	}
	if n := logs.count("up 2"); n != 0 {
		t.Errorf("node 2, killed, logged up %d times", n)
	}
}

// TestRestartedNodeIsUsedAgain: a node marked down is found again by the
// probe once it is back, within one probe interval and one PING (each the
// node timeout), logged up once, and its next calls reach it.
func TestRestartedNodeIsUsedAgain(t *testing.T) {
	const ttl = 10 * time.Second
	const nodeTimeout = ttl / 20
	r, c, logs := defaultsRig(t)
	if err := r.procs[2].Kill(); err != nil {
		t.Fatal(err)
	}
	splitTry(t, r, c, "first", ttl)
	logs.await(t, 2*nodeTimeout, "down 2")
	if err := r.procs[2].Restart(t.Context(), false); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	logs.await(t, 2*nodeTimeout, "up 2")
	t.Logf("node 2 was up again %v after its restart", time.Since(back))
	l, err := c.TryLock(t.Context(), "after", ttl)
	if err != nil {
		t.Fatal(err)
	}
	r.settled(t, "after", l.Value()) // node 2 holds it too
	if err := l.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n, m := logs.count("down 2"), logs.count("up 2"); n != 1 || m != 1 {
		t.Errorf("node 2 logged down %d and up %d times, want once each", n, m)
	}
}

// TestCloseStopsTheProbe: the probe of a killed node runs until Close, and
// not after it.
func TestCloseStopsTheProbe(t *testing.T) {
	const ttl = 10 * time.Second
	r := newRig(t, 3)
	warmUp(t, r.clients)
	before := goleak.IgnoreCurrent()
	logs := newTransitions()
	c, err := redlock.New(r.clients, redlock.WithLogger(slog.New(logs)))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.procs[2].Kill(); err != nil {
		t.Fatal(err)
	}
	splitTry(t, r, c, "first", ttl)
	logs.await(t, ttl/10, "down 2")
	// The probe's goroutine is started before the line is logged, but a
	// goroutine not yet scheduled shows no frame in a stack dump.
	for deadline := time.Now().Add(ttl / 10); !probeRunning(); {
		if time.Now().After(deadline) {
			t.Fatalf("no probe runs for the killed node (logged up %d times)", logs.count("up 2"))
		}
		time.Sleep(time.Millisecond) // polling the goroutines, bounded
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t, before)
}

// probeRunning reports whether a goroutine is inside a node probe.
func probeRunning() bool {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Contains(string(buf[:n]), "redlock.(*Client).probe")
		}
		buf = make([]byte, 2*len(buf)) // truncated: every goroutine's stack must be in it
	}
}

// TestScriptErrorReplyKeepsTheNodeUp: a node that answers with an error
// reply (here WRONGTYPE from inside the acquire script) is up: its calls
// keep reaching it, and it is never marked down.
func TestScriptErrorReplyKeepsTheNodeUp(t *testing.T) {
	r := newRig(t, 3)
	logs := newTransitions()
	obs := newEventLog()
	c := r.client(t, redlock.WithLogger(slog.New(logs)), redlock.WithObserver(obs))
	const key = "wrongtype"
	if err := r.clients[2].HSet(t.Context(), redlock.FenceKey(key), "f", "v").Err(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		l, err := c.TryLock(t.Context(), key, time.Minute)
		if err != nil {
			t.Fatal(err) // nodes 0 and 1 are a quorum
		}
		if err := l.Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	// Node 2's answers may come after the quorum decided: wait for all 3.
	ofNode2 := func(e event) bool { return e.kind == "node-error" && e.nodeErr.Node == 2 }
	eventually(t, time.Now().Add(10*time.Second), "node 2's 3 replies", func() bool { return obs.count(ofNode2) >= 3 })
	for _, e := range obs.all() {
		if ofNode2(e) && !strings.Contains(e.nodeErr.Error(), "WRONGTYPE") {
			t.Errorf("node 2: %v, want its WRONGTYPE reply", e.nodeErr)
		}
	}
	if n := logs.count("down 2"); n != 0 {
		t.Errorf("node 2 was marked down %d times on an error reply", n)
	}
}

// TestNodeErrorNamesTheRealCause: with 2 of 3 nodes on closed ports and the
// default node timeout, their calls end at our deadline while go-redis
// still retries the refused dial; once it reported the refusal, the
// NodeErrors of the next attempt say so (also in errors.Is), not only
// "node timeout".
func TestNodeErrorNamesTheRealCause(t *testing.T) {
	r := newRig(t, 1)
	nodes := []redis.UniversalClient{r.clients[0]}
	for range 2 {
		port, err := redisproc.FreePort() // nothing listens there
		if err != nil {
			t.Fatal(err)
		}
		rc := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port), MaxRetries: -1})
		t.Cleanup(func() { _ = rc.Close() })
		nodes = append(nodes, rc)
	}
	c, err := redlock.New(nodes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_, err = c.TryLock(t.Context(), "first", 10*time.Second)
	t.Logf("first attempt: %v", err)
	_, err = c.TryLock(t.Context(), "second", 10*time.Second)
	if !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("TryLock with 2 of 3 nodes refused: %v, want ErrNotAcquired", err)
	}
	named := 0
	for _, ne := range nodeErrorsIn(err) {
		if strings.Contains(ne.Error(), "connection refused") {
			named++
		}
	}
	if named == 0 || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("TryLock: %v\nwant a NodeError that names the refused connection (%d do), and ECONNREFUSED in the chain", err, named)
	}
}

// defaultsRig is 3 warmed-up nodes and a Client with every option default
// but a logger that counts the node transitions.
func defaultsRig(t *testing.T) (*rig, *redlock.Client, *transitions) {
	t.Helper()
	r := newRig(t, 3)
	warmUp(t, r.clients)
	logs := newTransitions()
	c, err := redlock.New(r.clients, redlock.WithLogger(slog.New(logs)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return r, c, logs
}
