package backend

import (
	"context"
	"fmt"
)

// Pause freezes Node (SIGSTOP) and, on undo, resumes it: a node in a long GC
// pause or a frozen VM, whose connections stay open.
type Pause struct{ Node int }

// Inject implements Fault.
func (f Pause) Inject(ctx context.Context, b Backend) (func(context.Context) error, error) {
	if err := b.Pause(ctx, f.Node); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error { return b.Resume(ctx, f.Node) }, nil
}

func (f Pause) String() string { return fmt.Sprintf("pause node %d", f.Node) }
