package redlock

import (
	"math"
	"time"
)

// Saturating Duration arithmetic: a Duration that wraps past the int64
// range turns a long wait into a negative one (no wait, or a panic in
// rand.N), so sums of values that options, arguments or
// nodes supply stop at the range's ends instead.

// addSat is a+b, held to [math.MinInt64, math.MaxInt64].
func addSat(a, b time.Duration) time.Duration {
	switch {
	case b > 0 && a > math.MaxInt64-b:
		return math.MaxInt64
	case b < 0 && a < math.MinInt64-b:
		return math.MinInt64
	}
	return a + b
}
