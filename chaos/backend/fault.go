package backend

import (
	"context"
	"slices"

	"github.com/fencedlock/fencedlock/chaos/fault"
)

// Fault is one node fault. Inject applies it to b and returns undo, which
// ends it (heals, resumes, starts the node again); undo is nil for a fault
// that is over when Inject returns, such as a restart. Faults are values:
// one Fault can be injected many times.
type Fault interface {
	Inject(ctx context.Context, b Backend) (undo func(ctx context.Context) error, err error)
}

// Kinds returns the fault kinds NewPlan draws from: those of package fault
// that are Scheduled, in its order. (fault.KillDuringAcquire is a node fault
// too, but fired by a client's Trigger rather than a schedule.)
func Kinds() []fault.Kind {
	return slices.DeleteFunc(fault.Kinds(), func(k fault.Kind) bool { return !k.Scheduled() })
}
