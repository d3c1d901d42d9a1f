package backend

import (
	"context"
	"fmt"
	"time"
)

// DelayedRestart kills Node and, on undo, starts it again, but never before
// Down has passed since the kill: undo waits out the rest. It is Redlock's
// remedy for a node that restarts without persistence: with Down longer than
// the largest lock TTL, every key the node held has expired elsewhere too by
// the time it comes back. WithData false (the usual form) brings it back
// empty; note that the node's fence counters are then gone as well.
type DelayedRestart struct {
	Node     int
	Down     time.Duration
	WithData bool
}

// Inject implements Fault.
func (f DelayedRestart) Inject(ctx context.Context, b Backend) (func(context.Context) error, error) {
	if err := b.Kill(ctx, f.Node); err != nil {
		return nil, err
	}
	killed := time.Now()
	return func(ctx context.Context) error {
		if wait := f.Down - time.Since(killed); wait > 0 {
			t := time.NewTimer(wait)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
				return fmt.Errorf("backend: delayed restart of node %d: %w", f.Node, ctx.Err())
			}
		}
		return b.Restart(ctx, f.Node, f.WithData)
	}, nil
}

func (f DelayedRestart) String() string {
	data := "without data"
	if f.WithData {
		data = "with data"
	}
	return fmt.Sprintf("kill node %d, restart %s after %v", f.Node, data, f.Down)
}
