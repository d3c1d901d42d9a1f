// Package sentinel holds what the backends with replicated nodes share about
// the one Sentinel that watches their primary/replica pairs: its timing,
// derived from the lock TTL, its configuration, the watch that follows its
// +switch-master events, and the bounded polls on Sentinel and on the pairs'
// servers. Where Sentinel and the servers run (processes, containers) is
// the backend's business.
package sentinel

import "time"

// Timing is how fast Sentinel acts, derived from the lock TTL of the
// workload and from the one period fixed in Sentinel's code: during a
// failover it asks the replicas for INFO every second
// (InfoDuringFailover).
type Timing struct {
	// Ping is Sentinel's ping period: a quarter of that second. Sentinel
	// trusts a replica's INFO for five ping periods when it picks one to
	// promote, so five must exceed the second with room for its timer's
	// 100ms ticks; a shorter period leaves it no replica to promote.
	Ping time.Duration
	// DownAfter is Sentinel's down-after-milliseconds: half the TTL, so
	// that a failover is over while the holds granted just before it are
	// still valid, and the key the promoted replica lacks is one a holder
	// still relies on; but at least four ping periods, since Sentinel
	// declares down a server whose first PONG on a new link comes later
	// than that (it makes a new link to every primary it switches to).
	// With a TTL under 2s, holds granted in a failover's lag may expire
	// before the promotion: the fence counter increments are still lost.
	DownAfter time.Duration
	// Period is Sentinel's INFO, hello, ask and reconnect period: a tenth
	// of the TTL, so that Sentinel sees a role change or a server coming
	// back within a tenth of a hold's life (its timer ticks every 100ms:
	// a shorter period acts as 100ms).
	Period time.Duration
	// FailoverTimeout is Sentinel's failover-timeout, which bounds each
	// step of a failover. Sentinel learns that the replica took the
	// promotion from its INFO, asked for every second: three such
	// seconds, or twice the TTL if longer.
	FailoverTimeout time.Duration
}

// InfoDuringFailover is the INFO period Sentinel keeps, fixed in its code,
// for the replicas of a primary that is down or being failed over.
const InfoDuringFailover = time.Second

// TimingFor is the timing for a workload whose largest lock TTL is ttl.
func TimingFor(ttl time.Duration) Timing {
	ping := InfoDuringFailover / 4
	return Timing{
		Ping:            ping,
		DownAfter:       max(ttl/2, 4*ping),
		Period:          max(ttl/10, time.Millisecond),
		FailoverTimeout: max(3*InfoDuringFailover, 2*ttl),
	}
}

// Settle bounds every wait on Sentinel: its detection (DownAfter), the
// wait it keeps between two failovers of one primary (twice the failover
// timeout) and one attempt.
func (t Timing) Settle() time.Duration { return t.DownAfter + 3*t.FailoverTimeout }
