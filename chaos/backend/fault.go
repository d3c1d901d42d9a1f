package backend

import (
	"context"

	"github.com/fencedlock/fencedlock/chaos/fault"
)

// Fault is one node fault. Inject applies it to b and returns undo, which
// ends it (heals, resumes, starts the node again); undo is nil for a fault
// that is over when Inject returns, such as a restart. Faults are values:
// one Fault can be injected many times.
type Fault interface {
	Inject(ctx context.Context, b Backend) (undo func(ctx context.Context) error, err error)
}

// Kinds returns the fault kinds NewPlan draws from: the node faults of
// package fault that a Backend injects by itself, in a fixed order.
// (fault.KillDuringAcquire is a node fault too, but fired by a client's
// Trigger rather than a schedule.)
func Kinds() []fault.Kind {
	return []fault.Kind{
		fault.Kill, fault.Restart, fault.RestartWithoutData, fault.DelayedRestart,
		fault.Pause, fault.Partition, fault.Latency, fault.ClockSkew, fault.LoseReplies,
	}
}
