package backend

import (
	"context"
	"fmt"
)

// Partition cuts Node off from its clients and, on undo, heals the link.
type Partition struct{ Node int }

// Inject implements Fault.
func (f Partition) Inject(ctx context.Context, b Backend) (func(context.Context) error, error) {
	if err := b.Partition(ctx, f.Node); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error { return b.Heal(ctx, f.Node) }, nil
}

func (f Partition) String() string { return fmt.Sprintf("partition node %d", f.Node) }
