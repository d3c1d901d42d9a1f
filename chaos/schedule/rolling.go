package schedule

import (
	"fmt"
	"time"

	"github.com/fencedlock/fencedlock/chaos/backend"
	"github.com/fencedlock/fencedlock/chaos/fault"
)

// NewRollingPlan is a rolling restart of nodes without persistence, as an
// operator upgrades them: every node in turn (0, 1, …, nodes−1, 0, …) is
// restarted without its data (fault.RestartWithoutData), one at a time,
// each spacing after the node before answered again: the steps are planned
// spacing apart from spacing on, and each keeps its node reserved for
// spacing after the restart returned (Step.Settle) under a MaxDown of 1,
// so Run starts the next one late when a restart took time, never early.
// The plan ends with the last restart that the duration leaves spacing
// after. The same arguments give the same Plan (the seed only labels it).
func NewRollingPlan(nodes int, duration, spacing time.Duration, seed uint64) (Plan, error) {
	switch {
	case nodes < 1:
		return Plan{}, fmt.Errorf("%w: %d nodes", ErrInvalidPlan, nodes)
	case duration <= 0:
		return Plan{}, fmt.Errorf("%w: duration %v", ErrInvalidPlan, duration)
	case spacing <= 0:
		return Plan{}, fmt.Errorf("%w: spacing %v", ErrInvalidPlan, spacing)
	}
	p := Plan{Seed: seed, Duration: duration, MaxDown: 1}
	for i, at := 0, spacing; at+spacing <= duration; i, at = i+1, at+spacing {
		n := i % nodes
		p.Steps = append(p.Steps, Step{At: at, Settle: spacing, Kind: fault.RestartWithoutData, Node: n,
			Fault: backend.Restart{Node: n}})
	}
	return p, nil
}
