package redlock

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/internal/redistest"
)

type hourBackoff struct{}

func (hourBackoff) Backoff(int) (time.Duration, bool) { return time.Hour, true }

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
	procs := redistest.StartN(t, 3)
	nodes := make([]redis.UniversalClient, len(procs))
	for i, p := range procs {
		rc := redis.NewClient(&redis.Options{Addr: p.Addr()})
		t.Cleanup(func() { _ = rc.Close() })
		nodes[i] = rc
	}
	const key = "presence"
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	// Watch every node's release channel, as another process would.
	heard := make(chan time.Time, 64)
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
	// Another process holds the key.
	for i, rc := range nodes {
		if err := rc.Set(ctx, key, "other-process-H", time.Minute).Err(); err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
	}
	c, err := New(nodes, WithRetry(hourBackoff{}), WithNodeTimeout(time.Second))
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
	// Six announcements: the first, four gaps that double from
	// presentFirst, and one presentEvery after that.
	var at []time.Time
	for len(at) < 6 {
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
	gaps := make([]time.Duration, len(at)-1)
	for i := range gaps {
		gaps[i] = at[i+1].Sub(at[i])
	}
	t.Logf("gaps between announcements: %v", gaps)
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
