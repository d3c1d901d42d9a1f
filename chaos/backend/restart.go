package backend

import (
	"context"
	"fmt"
)

// Restart kills Node and starts it again at once, with its data or empty.
// It is over when Inject returns: there is no undo.
type Restart struct {
	Node     int
	WithData bool
}

// Inject implements Fault.
func (f Restart) Inject(ctx context.Context, b Backend) (func(context.Context) error, error) {
	return nil, b.Restart(ctx, f.Node, f.WithData)
}

func (f Restart) String() string {
	if f.WithData {
		return fmt.Sprintf("restart node %d with data", f.Node)
	}
	return fmt.Sprintf("restart node %d without data", f.Node)
}
