package redlock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/redlock"
)

func TestTryLockUnlock(t *testing.T) {
	r := newRig(t, 5)
	c := r.client(t)
	ctx := t.Context()
	l, err := c.TryLock(ctx, "orders:42", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l.Token() == 0 {
		t.Fatal("token is 0")
	}
	if l.Key() != "orders:42" || l.Value() == "" {
		t.Fatalf("key %q value %q", l.Key(), l.Value())
	}
	if got := r.holders(t, "orders:42", l.Value()); got < c.Quorum() {
		t.Fatalf("%d nodes hold the key, want >= %d", got, c.Quorum())
	}
	// The lock key is the user's key, with a TTL (on every node, once the
	// grants after the quorum landed: TryLock decides at the quorum).
	r.settled(t, "orders:42", l.Value())
	if pttl := r.clients[0].PTTL(ctx, "orders:42").Val(); pttl <= 0 || pttl > 10*time.Second {
		t.Fatalf("PTTL %v", pttl)
	}
	if _, err := c.TryLock(ctx, "orders:42", time.Second); !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("second TryLock: %v, want ErrNotAcquired", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Done():
	default:
		t.Fatal("Done not closed after Unlock")
	}
	if err := l.Unlock(ctx); !errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("second Unlock: %v, want ErrLockLost", err)
	}
	l2, err := c.TryLock(ctx, "orders:42", time.Second)
	if err != nil {
		t.Fatalf("after unlock: %v", err)
	}
	if l2.Token() <= l.Token() {
		t.Fatalf("token %d after %d", l2.Token(), l.Token())
	}
	if err := l2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	_ = c.Close() // the releases past the quorum finish in the background
	if n := r.anyKey(t, "orders:42"); n != 0 {
		t.Fatalf("key left on %d nodes", n)
	}
}

func TestQuorumWithDeadNodes(t *testing.T) {
	t.Parallel() // waits on servers starting and calls timing out, not on timing: runs beside the others of its kind
	for _, tc := range []struct {
		dead int
		ok   bool
	}{{0, true}, {1, true}, {2, true}, {3, false}, {5, false}} {
		t.Run(fmtDead(tc.dead), func(t *testing.T) {
			r := newRig(t, 5)
			for i := range tc.dead {
				if err := r.procs[i].Kill(); err != nil {
					t.Fatal(err)
				}
			}
			c := r.client(t, redlock.WithNodeTimeout(200*time.Millisecond))
			l, err := c.TryLock(t.Context(), "k", 5*time.Second)
			if tc.ok {
				if err != nil {
					t.Fatalf("with %d dead: %v", tc.dead, err)
				}
				if err := l.Unlock(t.Context()); err != nil {
					t.Fatalf("unlock with %d dead: %v", tc.dead, err)
				}
				return
			}
			if !errors.Is(err, redlock.ErrNotAcquired) {
				t.Fatalf("with %d dead: %v, want ErrNotAcquired", tc.dead, err)
			}
			var ne *redlock.NodeError
			if !errors.As(err, &ne) {
				t.Fatalf("with %d dead: %v carries no NodeError", tc.dead, err)
			}
			if n := r.anyKey(t, "k"); n != 0 {
				t.Fatalf("failed attempt left the key on %d live nodes", n)
			}
		})
	}
}

func fmtDead(n int) string { return string(rune('0'+n)) + "-dead" }

func TestPausedNodeAddsNoLatency(t *testing.T) {
	r := newRig(t, 5)
	if err := r.procs[4].Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.procs[4].Resume() })
	// A node timeout far above loopback latency: if the paused node were
	// waited for, every acquire would take at least this long.
	const nodeTimeout = 2 * time.Second
	c := r.client(t, redlock.WithNodeTimeout(nodeTimeout))
	start := time.Now()
	for range 5 {
		l, err := c.TryLock(t.Context(), "k", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if el := time.Since(start); el >= nodeTimeout {
		t.Fatalf("5 acquire+release took %v with one paused node: the paused node was waited for", el)
	}
	if err := r.procs[4].Resume(); err != nil {
		t.Fatal(err)
	}
	_ = c.Close() // waits for the late answers of the paused node, then releases them
	if n := r.anyKey(t, "k"); n != 0 {
		t.Fatalf("key left on %d nodes after the paused node resumed", n)
	}
}

func TestUnlockNeverRemovesAnotherHoldersKey(t *testing.T) {
	r := newRig(t, 3)
	c := r.client(t)
	ctx := t.Context()
	l, err := c.TryLock(ctx, "k", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// The hold expires and another holder sets the key on every node.
	for _, rc := range r.clients {
		if err := rc.Set(ctx, "k", "someone-else", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Unlock(ctx); !errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("Unlock of a taken-over key: %v, want ErrLockLost", err)
	}
	if got := r.holders(t, "k", "someone-else"); got != 3 {
		t.Fatalf("other holder's key left on %d nodes, want 3", got)
	}
}

func TestExtend(t *testing.T) {
	r := newRig(t, 3)
	c := r.client(t)
	ctx := t.Context()
	l, err := c.TryLock(ctx, "k", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	r.settled(t, "k", l.Value())
	before := l.Until()
	if err := l.Extend(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if !l.Until().After(before) {
		t.Fatalf("Until %v not after %v", l.Until(), before)
	}
	extended := 0 // Extend decides at a quorum; the last node may still be on the wire
	for _, rc := range r.clients {
		if rc.PTTL(ctx, "k").Val() > 20*time.Second {
			extended++
		}
	}
	if extended < c.Quorum() {
		t.Fatalf("%d nodes extended, want >= %d", extended, c.Quorum())
	}
	// The key vanishes on a majority: Extend must not re-create it.
	for _, rc := range r.clients[:2] {
		rc.Del(ctx, "k")
	}
	if err := l.Extend(ctx, 30*time.Second); !errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("Extend of a vanished key: %v, want ErrLockLost", err)
	}
	if n := r.clients[0].Exists(ctx, "k").Val() + r.clients[1].Exists(ctx, "k").Val(); n != 0 {
		t.Fatal("Extend re-created a vanished key")
	}
	select {
	case <-l.Done():
	default:
		t.Fatal("Done not closed after a failed extension")
	}
}

func TestUnlockWithFailedNodesIsNotLockLost(t *testing.T) {
	r := newRig(t, 3)
	c := r.client(t, redlock.WithNodeTimeout(200*time.Millisecond))
	ctx := t.Context()
	l, err := c.TryLock(ctx, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	r.settled(t, "k", l.Value())
	// Two of three holders die: the release reaches one node only, and
	// whether the others still hold it is unknown — not "lost".
	for _, p := range r.procs[1:] {
		if err := p.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	err = l.Unlock(ctx)
	var ne *redlock.NodeError
	if err == nil || errors.Is(err, redlock.ErrLockLost) || !errors.As(err, &ne) {
		t.Fatalf("Unlock with 2 of 3 holders dead: %v, want node errors without ErrLockLost", err)
	}
}
