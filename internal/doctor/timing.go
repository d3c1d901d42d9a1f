package doctor

import "time"

// The lock's defaults, as redlock/options.go documents them (WithDriftFactor,
// WithNodeTimeout). This package cannot read them from redlock without
// importing it; timing_test.go checks these against a lock client.
const (
	// defaultDriftFactor is the share of the TTL that validity gives up for
	// the clocks of client and nodes drifting apart (WithDriftFactor's
	// default): a node clock that runs fast by this ratio or less keeps a
	// key at least as long as the client counts on it.
	defaultDriftFactor = 0.01
	// driftFloor is the fixed part of the allowance: Redis counts expiry in
	// whole milliseconds, and the lock truncates the TTL it sends to them.
	driftFloor = 2 * time.Millisecond
	// The default node timeout is a twentieth of the TTL, within these.
	nodeTimeoutDivisor = 20
	minNodeTimeout     = 5 * time.Millisecond
	maxNodeTimeout     = 500 * time.Millisecond
)

// timing is what the lock allows for a TTL.
type timing struct {
	ttl         time.Duration
	factor      float64       // the drift factor
	allowance   time.Duration // ttl·factor + floor: the drift over one TTL that validity covers
	nodeTimeout time.Duration // the bound on each call to a node
}

func timingFor(ttl time.Duration) timing {
	return timing{
		ttl:         ttl,
		factor:      defaultDriftFactor,
		allowance:   time.Duration(float64(ttl)*defaultDriftFactor) + driftFloor,
		nodeTimeout: min(max(ttl/nodeTimeoutDivisor, minNodeTimeout), maxNodeTimeout),
	}
}

// DriftAllowance is the part of ttl that the lock's validity gives up for
// clock drift by default; a ttl not longer than it leaves no validity.
func DriftAllowance(ttl time.Duration) time.Duration { return timingFor(ttl).allowance }
