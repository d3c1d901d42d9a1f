package main

import (
	"slices"
	"time"
)

// Result is one library in one scenario. Latencies are acquire+release for
// serial, parallel, paused, replicas and replicas-parallel, and the wait
// from the Lock call to the acquisition for onekey, multiclient and
// multiclient-down.
type Result struct {
	Scenario    string  `json:"scenario"`
	Library     string  `json:"library"`
	Ops         int64   `json:"ops"`
	Errors      int64   `json:"errors"`
	FirstError  string  `json:"first_error,omitempty"`
	Seconds     float64 `json:"seconds"`
	OpsPerSec   float64 `json:"ops_per_s"`
	P50Ms       float64 `json:"p50_ms"`
	P90Ms       float64 `json:"p90_ms"`
	P99Ms       float64 `json:"p99_ms"`
	MaxMs       float64 `json:"max_ms"`
	AllocsPerOp float64 `json:"allocs_per_op"`
	BytesPerOp  float64 `json:"bytes_per_op"`
	// What the library sent, per operation, over all nodes: commands, round
	// trips (a pipeline is one), and commands by kind.
	CmdsPerOp  float64            `json:"cmds_per_op"`
	TripsPerOp float64            `json:"round_trips_per_op"`
	Commands   map[string]float64 `json:"commands_per_op,omitempty"`
	// The replicas that the library's WAIT replies reported, summed, per
	// operation (fencedlock-acks; "wait" in Commands counts the WAITs).
	ReplicaAcksPerOp float64 `json:"replica_acks_per_op,omitempty"`
	// onekey, multiclient and multiclient-down only
	PerGoroutineMin *int64       `json:"per_goroutine_min,omitempty"`
	PerGoroutineMax *int64       `json:"per_goroutine_max,omitempty"`
	Clients         int          `json:"clients,omitempty"`        // separate instances of the library (multiclient)
	PerClientMin    *int64       `json:"per_client_min,omitempty"` // acquisitions per instance (multiclient)
	PerClientMax    *int64       `json:"per_client_max,omitempty"`
	NodesDown       int          `json:"nodes_down,omitempty"`         // killed for the whole phase (multiclient-down)
	CutOffWaits     int64        `json:"cut_off_waits,omitempty"`      // still waiting when the run ended
	LongestCutOffMs float64      `json:"longest_cut_off_ms,omitempty"` // the longest of those
	CDF             [][2]float64 `json:"cdf,omitempty"`                // [wait ms, fraction ≤]

	p50, p99, max time.Duration
	h             *hist
}

// newResult summarises pr, the workers of clients instances of lib (worker g
// on instance g/(workers/clients)), as a row of scenario sc.
func newResult(sc, lib string, pr phaseResult, clients int) *Result {
	if pr.perG == nil {
		pr.perG = []int64{0}
	}
	h := pr.h
	r := &Result{
		Scenario: sc, Library: lib,
		Ops: pr.ops, Errors: pr.errs,
		Seconds: pr.elapsed.Seconds(),
		p50:     h.quantile(0.50), p99: h.quantile(0.99), max: h.max,
		h: &h,
	}
	if pr.first != nil {
		r.FirstError = pr.first.Error()
	}
	if pr.elapsed > 0 {
		r.OpsPerSec = float64(pr.ops) / pr.elapsed.Seconds()
	}
	r.P50Ms, r.P99Ms, r.MaxMs = ms(r.p50), ms(r.p99), ms(r.max)
	r.P90Ms = ms(h.quantile(0.90))
	if pr.ops > 0 {
		r.AllocsPerOp = float64(pr.allocs) / float64(pr.ops)
		r.BytesPerOp = float64(pr.bytes) / float64(pr.ops)
		r.CmdsPerOp = float64(pr.sent.Total()) / float64(pr.ops)
		r.TripsPerOp = float64(pr.sent.Trips) / float64(pr.ops)
		r.ReplicaAcksPerOp = float64(pr.sent.ReplicaAcks) / float64(pr.ops)
		r.Commands = map[string]float64{}
		for k, v := range pr.sent.Commands {
			r.Commands[k] = float64(v) / float64(pr.ops)
		}
	}
	if contendedScenario(sc) {
		lo, hi := slices.Min(pr.perG), slices.Max(pr.perG)
		r.PerGoroutineMin, r.PerGoroutineMax = &lo, &hi
		if sc != scOneKey {
			lo, hi := perClient(pr.perG, clients)
			r.Clients, r.PerClientMin, r.PerClientMax = clients, &lo, &hi
		}
		r.CutOffWaits, r.LongestCutOffMs = pr.stuck, ms(pr.longest)
		for _, p := range h.cdf() {
			r.CDF = append(r.CDF, [2]float64{ms(p.D), p.F})
		}
	}
	return r
}

// perClient returns the fewest and the most acquisitions of one instance,
// perG holding the workers of clients instances in order, an equal number
// each.
func perClient(perG []int64, clients int) (lo, hi int64) {
	clients = max(1, min(clients, len(perG)))
	per := len(perG) / clients
	for i := range clients {
		var n int64
		for _, v := range perG[i*per : (i+1)*per] {
			n += v
		}
		if i == 0 || n < lo {
			lo = n
		}
		hi = max(hi, n)
	}
	return lo, hi
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
