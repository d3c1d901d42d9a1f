package redlock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/redlock"
)

// TestDefaultNodeTimeout reads the default node timeout off a frozen node:
// with 2 of 3 nodes paused (SIGSTOP: connections open, nothing answered),
// an attempt can only fail when their calls time out, and each timeout is
// reported as a NodeError the moment it happens.
func TestDefaultNodeTimeout(t *testing.T) {
	for _, tc := range []struct {
		name string
		ttl  time.Duration
		want time.Duration // ttl/20, between 5ms and 500ms
		// below is a timeout the rule excludes: a wrong rule shows up
		// at or above it. 0: check the lower bound only.
		below time.Duration
	}{
		{"ttl/20", 4 * time.Second, 200 * time.Millisecond, 400 * time.Millisecond}, // not ttl/10 or more
		{"at most 500ms", 30 * time.Second, 500 * time.Millisecond, time.Second},    // unclamped: 1.5s
		{"at least 5ms", 40 * time.Millisecond, 5 * time.Millisecond, 0},            // unclamped: 2ms
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, 3)
			// A first lock, by a client of its own (its releases may still be
			// on the wire): connections open, scripts loaded, the fence key
			// table built, so that the attempt below costs only its waits.
			warm, err := r.client(t).TryLock(t.Context(), "warm-up", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if err := warm.Unlock(t.Context()); err != nil {
				t.Fatal(err)
			}
			rec := newEventLog()
			c, err := redlock.New(r.clients, redlock.WithObserver(rec)) // the default node timeout, not the rig's
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			for _, p := range r.procs[1:] {
				if err := p.Pause(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = p.Resume() }) // before c closes
			}
			start := time.Now()
			_, err = c.TryLock(t.Context(), "k", tc.ttl)
			if !errors.Is(err, redlock.ErrNotAcquired) {
				t.Fatalf("TryLock with 2 of 3 nodes frozen: %v, want ErrNotAcquired", err)
			}
			// The first error of a frozen node: with a 5ms timeout a loaded
			// machine can also miss the healthy node's deadline.
			first := rec.await(t, start.Add(time.Minute), "node error of a frozen node", func(e event) bool {
				return isKind("node-error")(e) && e.nodeErr.Node != 0
			})
			took := first.at.Sub(start)
			t.Logf("ttl %v: the first frozen node timed out after %v", tc.ttl, took)
			if took < tc.want {
				t.Errorf("a frozen node timed out after %v, before the default node timeout %v", took, tc.want)
			}
			if tc.below > 0 && took >= tc.below {
				t.Errorf("a frozen node timed out after %v, want the default node timeout %v (and below %v)", took, tc.want, tc.below)
			}
		})
	}
}
