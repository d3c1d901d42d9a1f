package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/redlock"
)

// The Go blocks of docs/using.md and docs/operating.md, compiled here (internal/doccheck checks
// that the page shows exactly the marked lines). Examples in
// example_test.go run the same calls against real nodes.

// lockAndWatch waits for a lock, keeps it extended, and stops work when it
// is lost.
func lockAndWatch(ctx context.Context, locks *redlock.Client, work func() <-chan struct{}) error {
	// doc block: docs/using.md
	l, err := locks.Lock(ctx, "report", 30*time.Second, redlock.AutoExtend())
	if err != nil {
		return err // ErrNotAcquired, joined with ctx.Err() when ctx ended
	}
	defer l.Unlock(context.WithoutCancel(ctx))
	select {
	case <-l.Done(): // a quorum says it is gone, or its validity ran out: stop writing
		return redlock.ErrLockLost
	case <-work():
	}
	// end doc block
	return nil
}

// nightlyBilling runs a job under Do.
func nightlyBilling(ctx context.Context, locks *redlock.Client, billing interface {
	Run(ctx context.Context, token uint64) error
}) error {
	// doc block: docs/using.md
	err := locks.Do(ctx, "nightly-billing", 30*time.Second, func(ctx context.Context, l *redlock.Lock) error {
		return billing.Run(ctx, l.Token())
	})
	if errors.Is(err, redlock.ErrLockLost) {
		return fmt.Errorf("billing stopped when the lock was lost: %w", err)
	}
	// end doc block
	return err
}

// export writes batches, each call under a lease of the hold.
func export(ctx context.Context, locks *redlock.Client, batches []string, store interface {
	Write(ctx context.Context, token uint64, batch string) error
}) error {
	// doc block: docs/using.md
	err := locks.Do(ctx, "export", 30*time.Second, func(ctx context.Context, l *redlock.Lock) error {
		for _, batch := range batches {
			// The validity left now, less 2s for the last write to land; a new lease per call.
			call, cancel := l.Lease(ctx, 2*time.Second)
			err := store.Write(call, l.Token(), batch)
			cancel()
			if err != nil {
				return err // context.Cause(call) is ErrLockLost if the hold ended under it
			}
		}
		return nil
	})
	// end doc block
	return err
}

var _, _, _, _ = lockAndWatch, nightlyBilling, export, migrate

// migrate holds a lock across rolling restarts of nodes without
// persistence.
func migrate(ctx context.Context, nodes []redis.UniversalClient, work func(ctx context.Context, token uint64) error) error {
	// doc block: docs/operating.md
	locks, err := redlock.New(nodes, redlock.WithReacquireOnExtend())
	if err != nil {
		return err
	}
	defer locks.Close()
	l, err := locks.Lock(ctx, "migration", 30*time.Second, redlock.AutoExtend())
	if err != nil {
		return err
	}
	defer l.Unlock(context.WithoutCancel(ctx)) // with the option, sent to every node
	// end doc block
	return work(ctx, l.Token())
}
