package backend

import (
	"context"
	"fmt"
	"time"
)

// Latency adds D to every round trip to Node and, on undo, removes it.
type Latency struct {
	Node int
	D    time.Duration
}

// Inject implements Fault.
func (f Latency) Inject(ctx context.Context, b Backend) (func(context.Context) error, error) {
	if err := b.SetLatency(ctx, f.Node, f.D); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error { return b.SetLatency(ctx, f.Node, 0) }, nil
}

func (f Latency) String() string { return fmt.Sprintf("latency %v on node %d", f.D, f.Node) }
