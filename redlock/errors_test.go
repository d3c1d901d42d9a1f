package redlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/redlock"
)

// What an error says: the cause of each node's failure, on one line, and
// whether the outcome of an Unlock is known.
func TestErrorsSayTheirCause(t *testing.T) {
	for _, tc := range []struct {
		name string
		call func(t *testing.T, c *redlock.Client) error
	}{
		{
			name: "TryLock",
			call: func(t *testing.T, c *redlock.Client) error {
				_, err := c.TryLock(t.Context(), "k", time.Second)
				return err
			},
		},
		{
			// Ended by ctx: the attempts' node errors come with it.
			name: "Lock until ctx ends",
			call: func(t *testing.T, c *redlock.Client) error {
				// As the finding: a second, many node timeouts (the rig's
				// are at least 250ms), so that attempts fail before it ends.
				ctx, cancel := context.WithTimeout(t.Context(), 4*time.Second)
				defer cancel()
				_, err := c.Lock(ctx, "k", time.Second)
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("%v: want context.DeadlineExceeded in the chain", err)
				}
				return err
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, 3)
			c := r.client(t)
			for _, i := range []int{1, 2} {
				if err := r.procs[i].Kill(); err != nil {
					t.Fatal(err)
				}
			}
			err := tc.call(t, c)
			if !errors.Is(err, redlock.ErrNotAcquired) {
				t.Fatalf("%v: want ErrNotAcquired", err)
			}
			var ne *redlock.NodeError
			if !errors.As(err, &ne) {
				t.Fatalf("%q: no *NodeError in the chain: nothing says two nodes are down", err)
			}
			if ne.Node != 1 && ne.Node != 2 {
				t.Errorf("NodeError for node %d, want a killed one", ne.Node)
			}
			if msg := err.Error(); strings.Contains(msg, "\n") {
				t.Errorf("error spans lines: %q", msg)
			}
		})
	}
}

// Unlock with a ctx that has ended says what the nodes did when their
// answers are in, and otherwise that the outcome is unknown — never a bare
// ctx error that reads as a failure to release.
func TestUnlockWithEndedCtxSaysWhatIsKnown(t *testing.T) {
	r := newRig(t, 3)
	c := r.client(t)
	l, err := c.TryLock(t.Context(), "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err = l.Unlock(ctx)
	if err != nil && !errors.Is(err, redlock.ErrOutcomeUnknown) {
		t.Fatalf("Unlock with a cancelled ctx: %v, want nil or ErrOutcomeUnknown", err)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("Unlock with a cancelled ctx: %v, want ctx.Err() joined", err)
	}
	// The releases went out all the same.
	deadline := time.Now().Add(5 * time.Second)
	for r.anyKey(t, "k") > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("key still held on %d nodes after Unlock", r.anyKey(t, "k"))
		}
		time.Sleep(time.Millisecond) // polling a server condition, bounded
	}
}
