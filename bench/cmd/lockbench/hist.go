package main

import (
	"math/bits"
	"time"
)

// hist records durations in log-linear buckets, HDR style: 64 buckets per
// power of two (about 1.6% resolution) from 1ns to the largest
// time.Duration. Recording never allocates, so the measured loops charge the
// libraries, not the harness. A hist is not safe for concurrent use: each
// worker has its own and they are merged at the end.
type hist struct {
	counts [numBuckets]uint64
	n      uint64
	min    time.Duration
	max    time.Duration
}

const (
	subBits    = 6
	subCount   = 1 << subBits
	numBuckets = (64 - subBits + 1) * subCount
)

func bucketOf(d time.Duration) int {
	v := uint64(max(d, 0))
	if v < subCount {
		return int(v)
	}
	shift := bits.Len64(v) - 1 - subBits
	return (shift+1)*subCount + int(v>>shift) - subCount
}

// bucketUpper is the largest duration that falls into bucket i.
func bucketUpper(i int) time.Duration {
	if i < subCount {
		return time.Duration(i)
	}
	shift := i/subCount - 1
	top := uint64(i%subCount + subCount)
	return time.Duration((top+1)<<shift - 1)
}

func (h *hist) record(d time.Duration) {
	h.counts[bucketOf(d)]++
	if h.n == 0 || d < h.min {
		h.min = d
	}
	if d > h.max {
		h.max = d
	}
	h.n++
}

func (h *hist) merge(o *hist) {
	if o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.n += o.n
}

func (h *hist) reset() { *h = hist{} }

// quantile returns the q-quantile (0 < q ≤ 1), to the bucket's resolution,
// never above the exact maximum.
func (h *hist) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(q*float64(h.n) + 0.5)
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return min(bucketUpper(i), h.max)
		}
	}
	return h.max
}

// cdf returns (duration, fraction ≤ duration) at every non-empty bucket.
func (h *hist) cdf() []cdfPoint {
	if h.n == 0 {
		return nil
	}
	var pts []cdfPoint
	var seen uint64
	for i, c := range h.counts {
		if c == 0 {
			continue
		}
		seen += c
		pts = append(pts, cdfPoint{D: min(bucketUpper(i), h.max), F: float64(seen) / float64(h.n)})
	}
	return pts
}

type cdfPoint struct {
	D time.Duration
	F float64
}
