package redlocktest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/redlock"
	"github.com/fencedlock/fencedlock/redlocktest"
)

// nightlyReport stands for a user's job: it works in steps until ctx ends.
func nightlyReport(ctx context.Context, token uint64) error {
	step := time.NewTicker(10 * time.Millisecond)
	defer step.Stop()
	limit := time.NewTimer(time.Minute) // bounded: a test must not hang
	defer limit.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-step.C: // a step of work, each write carrying token
		case <-limit.C:
			return errors.New("ran a minute: ctx was never cancelled")
		}
	}
}

// doc block: docs/testing.md
func TestNightlyReportStopsWhenTheLockIsLost(t *testing.T) {
	nodes := redlocktest.Nodes(t, 3) // stopped when the test ends
	locks, err := redlock.New(nodes.Clients())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = locks.Close() })

	// A short TTL: the lock is lost within a second of the kill.
	err = locks.Do(t.Context(), "nightly-report", time.Second, func(ctx context.Context, l *redlock.Lock) error {
		// A majority of the nodes dies while the job runs.
		for _, n := range nodes[:2] {
			if err := n.Kill(); err != nil {
				return err
			}
		}
		return nightlyReport(ctx, l.Token()) // must stop once ctx is cancelled
	})
	if !errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("Do = %v, want ErrLockLost", err)
	}
}

// end doc block
