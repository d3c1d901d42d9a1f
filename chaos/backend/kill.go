package backend

import (
	"context"
	"fmt"
)

// Kill kills Node (SIGKILL) and, on undo, starts it again with its data.
type Kill struct{ Node int }

// Inject implements Fault.
func (f Kill) Inject(ctx context.Context, b Backend) (func(context.Context) error, error) {
	if err := b.Kill(ctx, f.Node); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error { return b.Start(ctx, f.Node) }, nil
}

func (f Kill) String() string { return fmt.Sprintf("kill node %d", f.Node) }
