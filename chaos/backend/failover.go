package backend

import (
	"context"
	"fmt"
	"time"
)

// Replicated is an optional Backend capability of backends whose nodes can
// each be a primary with an asynchronous replica under Sentinel. A backend
// that implements it but was started without replicas returns errors
// wrapping ErrUnsupported.
type Replicated interface {
	// FailOver holds back everything node i's primary sends to its
	// replica and to Sentinel (the replication stream, Sentinel's
	// replies), while clients still reach the primary and get its
	// acknowledgements, for lag; then stops the primary (SIGSTOP) and
	// returns once Sentinel has promoted the replica and the node's
	// address leads to it. The writes the primary acknowledged after the
	// hold began never reach the promoted replica: they are lost, lock
	// keys and fence counter increments alike. It fails if the pair is
	// not whole (a primary with an attached replica) when it begins, or
	// if the promotion does not come within the time Sentinel's own
	// timeouts allow; the pair is then left as it was, with the primary
	// resumed.
	FailOver(ctx context.Context, i int, lag time.Duration) error
	// Rejoin resumes the servers of node i that FailOver stopped, lets
	// what was held back go (to connections the promotion closed: it is
	// lost), and returns once the pair is whole again: Sentinel has made
	// the old primary a replica of the new one, and it is in sync.
	Rejoin(ctx context.Context, i int) error
}

// Failover fails Node's primary over to its replica while the replica lags
// by Lag: see Replicated.FailOver, which Inject calls. Undo is
// Replicated.Rejoin. A backend without replicas returns an error wrapping
// ErrUnsupported.
type Failover struct {
	Node int
	Lag  time.Duration
}

// Inject implements Fault.
func (f Failover) Inject(ctx context.Context, b Backend) (func(context.Context) error, error) {
	r, ok := b.(Replicated)
	if !ok {
		return nil, fmt.Errorf("%w: failover of node %d (%T)", ErrUnsupported, f.Node, b)
	}
	if err := r.FailOver(ctx, f.Node, f.Lag); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error { return r.Rejoin(ctx, f.Node) }, nil
}

func (f Failover) String() string {
	return fmt.Sprintf("fail node %d over to its replica lagging %v", f.Node, f.Lag)
}

// Promotions is an optional capability of a Replicated backend: it tells
// of the promotions Sentinel made that no FailOver asked for. A fault that
// keeps a primary from Sentinel past its down-after (a kill, a pause) makes
// Sentinel fail the node over, as in production: the promoted replica lacks
// what had not reached it, the loss a Failover brings. A run records each
// as a failover at that moment, so that a history shows what lost the
// writes.
type Promotions interface {
	// OnPromotion sets f, called with the node and the time of every such
	// promotion. f must not block.
	OnPromotion(f func(node int, at time.Time))
}
