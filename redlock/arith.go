package redlock

import (
	"math"
	"time"
)

// Saturating Duration arithmetic: a Duration that wraps past the int64
// range turns a long wait into a negative one (no wait, or a panic in
// rand.N), so sums and products of values that options, arguments or
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

// mulSat is d·n for n ≥ 0, held to the int64 range.
func mulSat(d time.Duration, n int64) time.Duration {
	switch {
	case n == 0 || d == 0:
		return 0
	case d > 0 && d > math.MaxInt64/time.Duration(n):
		return math.MaxInt64
	case d < 0 && d < math.MinInt64/time.Duration(n):
		return math.MinInt64
	}
	return d * time.Duration(n)
}

// msSat is n milliseconds (a node's PTTL: Redis keeps expiries up to
// about 2^63 ms away), held to the int64 range.
func msSat(n int64) time.Duration { return mulSat(time.Duration(n), int64(time.Millisecond)) }
