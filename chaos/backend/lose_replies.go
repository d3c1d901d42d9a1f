package backend

import (
	"context"
	"errors"
	"fmt"
)

// Proxied is an optional Backend capability of backends whose nodes sit
// behind a fault proxy that acts at once and leaves the node untouched.
// Both backends of this module implement it.
type Proxied interface {
	// DropReplies, while drop is on, lets every request reach node i and be
	// applied, and drops every reply on the way back, as when a connection
	// dies right after the node wrote.
	DropReplies(ctx context.Context, i int, drop bool) error
	// Blackhole, while on, drops every byte to and from node i, as
	// Partition does, but at the proxy alone: at once on every backend
	// (a Docker partition also disconnects the container, which takes
	// a while).
	Blackhole(ctx context.Context, i int, on bool) error
}

// ErrUnsupported is wrapped by the errors of a fault the Backend has no
// capability for.
var ErrUnsupported = errors.New("backend: fault not supported by this backend")

// LoseReplies lets Node apply what its clients send while dropping every
// reply and, on undo, lets the replies through again. A client sees its call
// time out, though the node acted on it: a grant it does not know it has,
// a release it cannot confirm.
type LoseReplies struct{ Node int }

// Inject implements Fault.
func (f LoseReplies) Inject(ctx context.Context, b Backend) (func(context.Context) error, error) {
	d, ok := b.(Proxied)
	if !ok {
		return nil, fmt.Errorf("%w: lose replies on node %d (%T)", ErrUnsupported, f.Node, b)
	}
	if err := d.DropReplies(ctx, f.Node, true); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error { return d.DropReplies(ctx, f.Node, false) }, nil
}

func (f LoseReplies) String() string { return fmt.Sprintf("lose replies of node %d", f.Node) }
