package redlock

import (
	"testing"
	"time"
)

// turnsClient is a Client with n nodes (none dialled) and its wait queue
// for key, every node's subscription confirmed but the last unconfirmed
// ones: as a head sees them through pub/sub.
func turnsClient(t *testing.T, n, quorum, unconfirmed int) (*Client, *keyQueue) {
	t.Helper()
	c := &Client{nodes: make([]node, n), quorum: quorum, closing: make(chan struct{}), cfg: defaultConfig()}
	c.id = [4]byte{0xaa, 0xbb, 0xcc, 0xdd}
	c.waiters = newWaitQueues(c)
	q, _ := c.waiters.join("k")
	for i := range n - unconfirmed {
		c.waiters.deliver(i, releaseChannel("k"), "", true)
	}
	return c, q
}

// Values as the Clients make them: the last 8 characters are the Client's
// id (clientOf).
const (
	otherID   = "11111111"
	thirdID   = "22222222"
	otherHold = "0000000000000001" + otherID
	thirdHold = "0000000000000002" + thirdID
)

func woken(q *keyQueue) bool {
	select {
	case <-q.released:
		return true
	default:
		return false
	}
}

// A release that names another process's turn wakes a head whose backoff
// is just spent (nothing left of its sleep): it must still yield to that
// process and let its hold pass, not ask into its attempt. Before, a head
// with no sleep left asked at once: with 8 processes, one cross-process
// hold in seven went out of turn, and every one of them split the votes
// with the process named.
func TestHeadWithNoSleepLeftYieldsToTheNamedProcess(t *testing.T) {
	c, q := turnsClient(t, 3, 2, 0)
	ch := releaseChannel("k")
	for i := range 2 { // a third process releases, naming another
		c.waiters.deliver(i, ch, thirdHold+" "+otherID, false)
	}
	if !woken(q) {
		t.Fatal("a quorum's announcements of a release did not wake the head")
	}
	if next, mine := c.waiters.named(q); next != otherID || mine {
		t.Fatalf("named %q (mine %v), want %q", next, mine, otherID)
	}
	for i := range 2 { // which takes the key
		c.waiters.deliver(i, ch, "+"+otherHold+" 60000", false)
	}
	passed, err := c.stagger(t.Context(), q, nil, time.Now(), time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !passed {
		t.Fatal("a head with no sleep left went on to ask while the process named held the key")
	}
}

// With nothing named and nobody else seen, a head with no sleep left asks
// at once: stagger holds it for no yield.
func TestHeadWithNoSleepLeftAndNoNameAsksAtOnce(t *testing.T) {
	c, q := turnsClient(t, 3, 2, 0)
	start := time.Now()
	passed, err := c.stagger(t.Context(), q, nil, time.Now(), time.Minute, 0)
	if err != nil || passed {
		t.Fatalf("stagger: passed %v, err %v; want false, nil", passed, err)
	}
	// The yield would be yieldAtLeast at least (no round trip measured).
	if took := time.Since(start); took >= yieldAtLeast {
		t.Fatalf("stagger held a head %v with nothing named", took)
	}
}

// The last announcements of a release come after the head that it woke
// rearmed for its attempt. With a node down (its subscription never
// confirmed) two of them are enough to wake a head on their own: counted
// again, they named the process that had just taken the key on that very
// release, whose next head then asked while its own process held the key
// (measured with 8 processes and 1 of 5 nodes down: 363 of 789 asks so
// made were refused by every node, and hand-offs broke down to one hold
// per turn).
func TestStaleReleaseNeitherWakesNorNames(t *testing.T) {
	c, q := turnsClient(t, 5, 3, 1) // enough: 2 of the 4 that confirmed
	ch := releaseChannel("k")
	self := c.waiters.self
	for i := range 2 {
		c.waiters.deliver(i, ch, otherHold+" "+self, false)
	}
	if !woken(q) {
		t.Fatal("enough announcements of a release did not wake the head")
	}
	if _, mine := c.waiters.named(q); !mine {
		t.Fatal("the release did not name this process")
	}
	c.waiters.drain(q) // its attempt begins
	for i := 2; i < 4; i++ {
		c.waiters.deliver(i, ch, otherHold+" "+self, false)
	}
	if woken(q) {
		t.Error("the last announcements of a release that woke the head woke it again")
	}
	if next, _ := c.waiters.named(q); next != "" {
		t.Errorf("the last announcements of a release named %q again", next)
	}
	// A new release still wakes the head and names whose turn it is.
	for i := range 2 {
		c.waiters.deliver(i, ch, thirdHold+" "+otherID, false)
	}
	if !woken(q) {
		t.Error("a new release after a stale one did not wake the head")
	}
	if next, _ := c.waiters.named(q); next != otherID {
		t.Errorf("a new release named %q, want %q", next, otherID)
	}
}

// A release heard from too few nodes to wake the head is not stale after a
// rearm: the head may have let that very hold pass (its grants were still
// announced on a quorum), and the rest of its announcements are the
// release it waits for.
func TestPartlyHeardReleaseStillWakesAfterLetPass(t *testing.T) {
	c, q := turnsClient(t, 3, 2, 0)
	ch := releaseChannel("k")
	for i := range 3 {
		c.waiters.deliver(i, ch, "+"+otherHold+" 60000", false)
	}
	c.waiters.deliver(0, ch, otherHold, false) // its release, heard from one node so far
	if !c.waiters.letPass(q, time.Minute) {
		t.Fatal("a hold granted by a quorum, released on one node, was not let pass")
	}
	for i := 1; i < 3; i++ {
		c.waiters.deliver(i, ch, otherHold, false)
	}
	if !woken(q) {
		t.Fatal("the release of the hold that the head let pass, announced on every node, did not wake it")
	}
}

// A stale announcement still counts with the nodes that granted the head's
// last attempt (they are free): with them, a quorum is free.
func TestStaleReleaseWakesWithFreeNodes(t *testing.T) {
	c, q := turnsClient(t, 3, 2, 0)
	ch := releaseChannel("k")
	for i := range 2 {
		c.waiters.deliver(i, ch, otherHold, false)
	}
	if !woken(q) {
		t.Fatal("a quorum's announcements did not wake the head")
	}
	c.waiters.drain(q)
	c.waiters.tried(q, time.Millisecond, true, 1) // one node granted, then stepped back
	c.waiters.deliver(2, ch, otherHold, false)
	if !woken(q) {
		t.Fatal("a stale release on the one node that refused, with one free node, did not wake the head")
	}
}
