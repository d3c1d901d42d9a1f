package history

import "fmt"

// Validate checks what a checker may rely on: IDs are positions, node
// faults name nodes of the run (but in a version 1 history), ops that name
// a hold name a successful acquire of the same key that came before, and
// only extends record re-creates, on nodes of the run.
// ReadJSONL returns only histories that pass it.
func (h History) Validate() error {
	for i, op := range h.Ops {
		if op.ID != i+1 {
			return fmt.Errorf("op %d has ID %d", i+1, op.ID)
		}
		if len(op.Reacquired) > 0 && op.Kind != KindExtend {
			return fmt.Errorf("%s op %d records re-creates: only an extend makes them", op.Kind, op.ID)
		}
		for _, n := range op.Reacquired {
			if n < 0 || (h.Nodes > 0 && n >= h.Nodes) {
				return fmt.Errorf("extend %d re-created its key on node %d of %d", op.ID, n, h.Nodes)
			}
		}
		if op.Hold == 0 {
			if op.Kind == KindRelease || op.Kind == KindWrite || op.Kind == KindLost || op.Kind == KindExtend {
				return fmt.Errorf("%s op %d names no hold", op.Kind, op.ID)
			}
			continue
		}
		if op.Kind == KindFault && !op.Fault.ClientSide() && h.Nodes > 0 && op.Node >= h.Nodes && h.Version != 1 {
			return fmt.Errorf("fault %d names node %d of %d", op.ID, op.Node, h.Nodes)
		}
		if op.Hold < 1 || op.Hold >= op.ID {
			return fmt.Errorf("op %d names hold %d, not an earlier op", op.ID, op.Hold)
		}
		a := h.Ops[op.Hold-1]
		if a.Kind != KindAcquire || a.Outcome != OK || a.Key != op.Key {
			return fmt.Errorf("op %d names hold %d, not a successful acquire of %q", op.ID, op.Hold, op.Key)
		}
	}
	return nil
}
