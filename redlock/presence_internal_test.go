package redlock

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/internal/redistest"
)

// constBackoff waits the same time before every retry.
type constBackoff time.Duration

func (b constBackoff) Backoff(int) (time.Duration, bool) { return time.Duration(b), true }

// watchPresence starts a Client's Lock on key, held by another process on
// every node, retrying after backoff, and returns a channel of the times
// its "?" announcements arrive on any node (as another process hears them),
// the Lock's cancel, and its result (an error: the key stays held).
func watchPresence(t *testing.T, ctx context.Context, key string, backoff time.Duration) (*Client, chan time.Time, context.CancelFunc, chan error) {
	t.Helper()
	procs := redistest.StartN(t, 3)
	nodes := make([]redis.UniversalClient, len(procs))
	for i, p := range procs {
		rc := redis.NewClient(&redis.Options{Addr: p.Addr()})
		t.Cleanup(func() { _ = rc.Close() })
		nodes[i] = rc
	}
	heard := make(chan time.Time, 256)
	for i, rc := range nodes {
		ps := rc.Subscribe(ctx, releaseChannel(key))
		t.Cleanup(func() { _ = ps.Close() })
		if _, err := ps.Receive(ctx); err != nil { // the confirmation
			t.Fatalf("node %d: %v", i, err)
		}
		go func() {
			for m := range ps.Channel() {
				if strings.HasPrefix(m.Payload, "?") {
					heard <- time.Now()
				}
			}
		}()
	}
	for i, rc := range nodes {
		if err := rc.Set(ctx, key, "other-process-H", time.Minute).Err(); err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
	}
	c, err := New(nodes, WithRetry(constBackoff(backoff)), WithNodeTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	lctx, lcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := c.Lock(lctx, key, time.Minute)
		done <- err
	}()
	return c, heard, lcancel, done
}

// announcements waits for n of them, and ends the Lock.
func announcements(t *testing.T, ctx context.Context, heard chan time.Time, lcancel context.CancelFunc, done chan error, n int) []time.Time {
	t.Helper()
	var at []time.Time
	for len(at) < n {
		select {
		case tm := <-heard:
			at = append(at, tm)
		case <-ctx.Done():
			t.Fatalf("%d announcements heard: %v", len(at), ctx.Err())
		}
	}
	lcancel()
	if err := <-done; err == nil {
		t.Fatal("Lock succeeded on a held key")
	}
	return at
}

// gaps are the times between announcements, logged.
func gaps(t *testing.T, at []time.Time) []time.Duration {
	t.Helper()
	g := make([]time.Duration, len(at)-1)
	for i := range g {
		g[i] = at[i+1].Sub(at[i])
	}
	t.Logf("gaps between announcements: %v", g)
	return g
}

// A head that waits for a key its process has just subscribed announces
// itself ("?" and its Client's id) again soon after its first announcement,
// and then less and less often, up to every presentEvery. Processes that
// begin to wait for a new key together subscribe at slightly different
// times; one that subscribed after another's first announcement did not
// know it waits until the next, and the releases it made named the
// others only. Measured before, with 8 Clients starting together on a new
// key: in 4 runs of 7, one or two Clients waited 300 ms for their first
// hold while the others took their turns. Here the announcements are
// watched on the nodes: the second came presentEvery after the first.
func TestNewKeyHeadAnnouncesItselfAgainSoon(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, heard, lcancel, done := watchPresence(t, ctx, "presence", time.Hour)
	// Six announcements: the first, four gaps that double from
	// presentFirst, and one presentEvery after that.
	gaps := gaps(t, announcements(t, ctx, heard, lcancel, done, 6))
	// Before, the first gap was presentEvery. presentFirst is 16 times
	// shorter: three quarters of presentEvery leave a loaded machine's
	// timers most of it.
	if gaps[0] >= presentEvery*3/4 {
		t.Errorf("the second announcement came %v after the first, want well under %v", gaps[0], presentEvery)
	}
	// And the ramp ends: no storm of announcements. Timers do not fire
	// early, so this bound holds under any load.
	if gaps[4] < presentEvery/2 {
		t.Errorf("the sixth announcement came %v after the fifth, want about %v", gaps[4], presentEvery)
	}
}
