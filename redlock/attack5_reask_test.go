package redlock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/internal/redistest"
)

// Attack on the unlocked attempt state: a node re-asked by a split vote's
// winner still counts with its first answer (a refusal) until the re-ask
// answers. An Unlock in between leaves it out of its release (a refuser);
// the re-ask's grant, answered in time after the Unlock, must still be
// stepped back.

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
func TestAttack5ReaskGrantAfterUnlockIsReleased(t *testing.T) {
	const key = "attack5:reask"
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
