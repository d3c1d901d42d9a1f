package doctor

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// The clock check. Claim 3 of docs/protocol.md (mutual exclusion) assumes
// that over one TTL the clocks of client and node drift apart by less than
// the allowance ttl·factor + 2ms that validity gives up. Two things are
// measured with TIME, each reading bracketed by the local clock (before and
// after: the node read its clock in between, so a reading is off by at most
// half the round trip):
//
//   - the rate: two readings apart by a window; a node clock that runs fast
//     expires keys early (Redis 7 expires by its wall clock), and past the
//     allowance a key can vanish while its holder is within validity: fail.
//   - the offset: the node's wall clock against this machine's, and the
//     spread across nodes. An offset alone is harmless (a key's TTL counts
//     from the node's own clock), but clocks that far apart are not kept in
//     step, and a correction that steps a node's clock during a hold moves
//     its expiry by as much: past the allowance, warn.
//
// Only what is certain beyond the measurement's error is judged.

// maxRateWindow bounds the wait for the rate's second reading: the doctor
// answers within about a second. A window too short for the round trip
// leaves the rate's error large, and a rate within its error is not judged.
const maxRateWindow = time.Second

// clockReading is one TIME bracketed by the local clock.
type clockReading struct {
	local time.Time     // the middle of the bracket (with the monotonic reading)
	node  time.Time     // what TIME said
	rtt   time.Duration // the bracket's width
}

// offset is the node's wall clock minus the local one, within ±rtt/2.
func (r *clockReading) offset() time.Duration { return r.node.Sub(r.local.Round(0)) }

// readClock reads the node's clock as many times as the latency check
// PINGs it, and keeps the reading with the shortest round trip: the most
// precise one (as NTP filters its samples). Nil when TIME failed.
func readClock(ctx context.Context, rdb *redis.Client) *clockReading {
	var best *clockReading
	for range pings {
		before := time.Now()
		node, err := rdb.Time(ctx).Result()
		after := time.Now()
		if err != nil {
			return nil
		}
		if rtt := after.Sub(before); best == nil || rtt < best.rtt {
			best = &clockReading{local: before.Add(rtt / 2), node: node, rtt: rtt}
		}
	}
	return best
}

// checkClock takes the second reading, once the window since first makes
// the rate's error at most half the drift factor (or maxRateWindow passed),
// and judges rate and offset.
func checkClock(ctx context.Context, rdb *redis.Client, first *clockReading, rtts []time.Duration, t timing, f *nodeFacts) {
	if first == nil {
		f.add("clock", Warn, "TIME failed: the clock could not be checked", "allow the user TIME (+time)")
		return
	}
	slowest := first.rtt
	if len(rtts) > 0 {
		slowest = max(slowest, rtts[len(rtts)-1])
	}
	// The rate's error is (rtt₁+rtt₂)/2 / window: at most factor/2 when the
	// window is (rtt₁+rtt₂)/factor, and rtt₂, the best of several readings,
	// is no slower than the slowest PING.
	window := min(time.Duration(float64(first.rtt+slowest)/t.factor), maxRateWindow)
	if wait := window - time.Since(first.local); wait > 0 {
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-ctx.Done():
		}
		timer.Stop()
	}
	second := readClock(ctx, rdb)
	if second == nil {
		f.add("clock", Warn, "TIME failed: the clock could not be checked", "allow the user TIME (+time)")
		return
	}
	best := first
	if second.rtt < first.rtt {
		best = second
	}
	f.clock = best

	elapsed := second.local.Sub(first.local) // monotonic: what the lock measures validity with
	rate := float64(second.node.Sub(first.node)-elapsed) / float64(elapsed)
	rateErr := float64(first.rtt+second.rtt) / 2 / float64(elapsed)
	driftPerTTL := time.Duration(rate * float64(t.ttl))
	certainDrift := time.Duration((abs(rate) - rateErr) * float64(t.ttl)) // the least the drift can be
	off, offErr := best.offset(), best.rtt/2
	measured := fmt.Sprintf("node clock %s this machine's by %v (±%v); over one ttl (%v) it drifts %v (±%v); allowance %v",
		aheadBehind(off), round(abs(off)), round(offErr), t.ttl, round(driftPerTTL),
		round(time.Duration(rateErr*float64(t.ttl))), t.allowance)
	switch {
	case rate > 0 && certainDrift > t.allowance:
		f.add("clock", Fail, measured+": the node's clock runs fast, so a key can expire while its holder is within validity (mutual exclusion breaks)",
			"run NTP (chrony, systemd-timesyncd) on the node, with slewing, not stepping; or a larger drift factor (WithDriftFactor)")
	case certainDrift > t.allowance:
		f.add("clock", Warn, measured+": the node's clock runs slow, so keys outlive their TTL (a crashed holder blocks the key longer)",
			"run NTP (chrony, systemd-timesyncd) on the node")
	case abs(off)-offErr > t.allowance:
		f.add("clock", Warn, measured+": the clocks are not kept in step, and a correction stepping the node's clock during a hold moves its keys' expiry by up to the offset, more than the allowance",
			"run NTP on the node and on this machine, with slewing (chrony's makestep only at boot)")
	default:
		f.add("clock", OK, measured, "")
	}
}

// clockSpreadFindings compares the nodes' clocks with one another: beyond
// the allowance they are not kept in step (see checkClock).
func clockSpreadFindings(facts []*nodeFacts, t timing) []Finding {
	var lo, hi *nodeFacts
	for _, f := range facts {
		if f.clock == nil {
			continue
		}
		if lo == nil || f.clock.offset()+f.clock.rtt/2 < lo.clock.offset()+lo.clock.rtt/2 {
			lo = f
		}
		if hi == nil || f.clock.offset()-f.clock.rtt/2 > hi.clock.offset()-hi.clock.rtt/2 {
			hi = f
		}
	}
	if lo == nil || lo == hi {
		return nil
	}
	spread := hi.clock.offset() - lo.clock.offset()
	certain := (hi.clock.offset() - hi.clock.rtt/2) - (lo.clock.offset() + lo.clock.rtt/2)
	reason := fmt.Sprintf("node clocks %s and %s differ by %v (at least %v); allowance %v", hi.addr, lo.addr, round(spread), round(max(certain, 0)), t.allowance)
	if certain > t.allowance {
		return []Finding{{Check: "clock", Status: Warn, Reason: reason + ": the nodes' clocks are not kept in step",
			Fix: "run NTP on every node, from the same time sources"}}
	}
	return []Finding{{Check: "clock", Status: OK, Reason: reason}}
}

func aheadBehind(d time.Duration) string {
	if d < 0 {
		return "behind"
	}
	return "ahead of"
}

func abs[T ~int64 | ~float64](v T) T {
	if v < 0 {
		return -v
	}
	return v
}
