package backend

import (
	"context"
	"fmt"
)

// ClockSkew restarts Node, with its data, on a fake wall clock (Spec in
// libfaketime's FAKETIME syntax, e.g. "+0 x2" or "+30s") and, on undo,
// restarts it on the real clock. A skewed server expires keys early or late,
// which Redlock's safety argument does not allow for beyond its drift factor.
type ClockSkew struct {
	Node int
	Spec string
}

// Inject implements Fault.
func (f ClockSkew) Inject(ctx context.Context, b Backend) (func(context.Context) error, error) {
	if err := b.SetClockSkew(ctx, f.Node, f.Spec); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error { return b.SetClockSkew(ctx, f.Node, "") }, nil
}

func (f ClockSkew) String() string { return fmt.Sprintf("clock %q on node %d", f.Spec, f.Node) }
