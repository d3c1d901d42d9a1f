package redlock

import (
	"context"
	"strings"
	"testing"
	"time"
)

// bareClient is a Client over n nodes that are never dialled, for tests of
// the Client's own bookkeeping.
func bareClient(t *testing.T, n int) *Client {
	t.Helper()
	c := &Client{nodes: make([]node, n), quorum: n/2 + 1, cfg: defaultConfig()}
	c.life, c.end = context.WithCancel(context.Background())
	t.Cleanup(c.end)
	c.id = "55555555"
	c.all = allNodes(n)
	c.waiters = newWaitQueues(c)
	return c
}

// acquireCall is the KEYS and ARGV of acquire.lua for value, from a caller
// that does not wait.
func acquireCall(key, value string, ttl time.Duration) ([]string, []any) {
	order, leases := waitKeys(key)
	return []string{key, FenceKey(key), order, leases}, []any{value, ttl.Milliseconds(), 0, "55555555", 0, 0}
}

func woken(me *waiter) bool {
	select {
	case <-me.q.woken:
		return true
	default:
		return false
	}
}

// A node frees the key for a head exactly when it would grant it to the
// head (acquire.lua): nobody waits there, the head is the first waiter, or
// the head waited longer (an earlier start; on a tie, the smaller Client
// id). The head wakes once a quorum of nodes did, and not before.
func TestReleaseAnnouncementsWakeTheHeadByTheGrantRule(t *testing.T) {
	const since = 1_000_000 // the head's wait start, in ms
	for _, tc := range []struct {
		name  string
		first string // what each announcing node names as its first waiter
		wakes bool
	}{
		{"nobody waits", "", true},
		{"the head itself", "1000000 55555555", true},
		{"a younger waiter", "1000001 11111111", true},
		{"a tie, larger id", "1000000 99999999", true},
		{"an older waiter", "999999 99999999", false},
		{"a tie, smaller id", "1000000 11111111", false},
		{"a payload of another form", "garbage", false},
		{"an unreadable start", "x 11111111", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := bareClient(t, 5)
			me := c.waiters.join("k", time.UnixMilli(since), time.Second)
			c.waiters.rearm(me)
			for i := range c.quorum {
				if woken(me) {
					t.Fatalf("woken after %d announcements; the quorum is %d", i, c.quorum)
				}
				msg := strings.TrimSpace("v1 " + tc.first) // the released value, then the first waiter
				c.waiters.deliver(i, releaseChannel(c.id, "k"), msg, false)
				c.waiters.deliver(i, releaseChannel(c.id, "k"), msg, false) // a node counts once
			}
			if got := woken(me); got != tc.wakes {
				t.Errorf("a quorum announced first waiter %q: woken %v, want %v", tc.first, got, tc.wakes)
			}
		})
	}
}

// Announcements heard before the head's try began are forgotten (rearm):
// they announced releases its try already saw. Those heard while the try is
// out still count toward the next wake-up: they come after the nodes'
// answers, and lost, the head would sleep its backoff on a free key.
func TestRearmForgetsOnlyTheAnnouncementsBeforeTheTry(t *testing.T) {
	c := bareClient(t, 3)
	me := c.waiters.join("k", time.UnixMilli(1), time.Second)
	c.waiters.deliver(0, releaseChannel(c.id, "k"), "v1", false)
	c.waiters.rearm(me) // the try begins
	c.waiters.deliver(1, releaseChannel(c.id, "k"), "v1", false)
	if woken(me) {
		t.Fatal("woken by one announcement from the try and one from before it")
	}
	c.waiters.deliver(2, releaseChannel(c.id, "k"), "v1", false)
	if !woken(me) {
		t.Fatal("two announcements during the try (a quorum of 3) did not wake the head")
	}
}

// Only the head of a Client's queue is woken by the nodes; the next waiter
// becomes the head when the head leaves, and has its own place: a node
// that frees the key for the head may not free it for the next one.
func TestOnlyTheHeadIsWoken(t *testing.T) {
	c := bareClient(t, 3)
	head := c.waiters.join("k", time.UnixMilli(100), time.Second)
	next := c.waiters.join("k", time.UnixMilli(300), time.Second)
	if !head.atHead() || next.atHead() {
		t.Fatal("the first waiter is not the only head")
	}
	c.waiters.rearm(head)
	c.waiters.leave(head, true)
	if !next.atHead() {
		t.Fatal("the next waiter did not become the head when the head left")
	}
	c.waiters.rearm(next)
	for i := range 3 {
		c.waiters.deliver(i, releaseChannel(c.id, "k"), "v1 200 11111111", false) // older than next
	}
	if woken(next) {
		t.Error("the new head was woken by releases announced to an older waiter")
	}
}

// A Client hears its own release twice: in the release's reply and on the
// channel. The second copy of a release comes after the head it woke has
// tried: counted again, it would wake that head for nothing.
func TestAReleaseHeardTwiceCountsOnce(t *testing.T) {
	c := bareClient(t, 3)
	me := c.waiters.join("k", time.UnixMilli(1), time.Second)
	c.waiters.rearm(me)
	for i := range 2 {
		c.waiters.heardRelease(i, "k", []any{int64(1), "v1"}) // the replies of the Unlock
	}
	if !woken(me) {
		t.Fatal("a quorum of released replies did not wake the head")
	}
	c.waiters.rearm(me) // the head tries; the channel's copies come now
	for i := range 3 {
		c.waiters.deliver(i, releaseChannel(c.id, "k"), "v1", false)
	}
	if woken(me) {
		t.Error("the channel's copies of releases already counted woke the head again")
	}
	for i := range 2 {
		c.waiters.deliver(i, releaseChannel(c.id, "k"), "v2", false) // the next release
	}
	if !woken(me) {
		t.Error("the next release, announced by a quorum, did not wake the head")
	}
}
