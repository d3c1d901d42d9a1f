package main

import (
	"slices"
	"time"
)

// Result is one library in one scenario. Latencies are acquire+release for
// serial, parallel and paused, and the wait from the Lock call to the
// acquisition for onekey.
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
	// onekey only
	PerGoroutineMin *int64       `json:"per_goroutine_min,omitempty"`
	PerGoroutineMax *int64       `json:"per_goroutine_max,omitempty"`
	CutOffWaits     int64        `json:"cut_off_waits,omitempty"`      // still waiting when the run ended
	LongestCutOffMs float64      `json:"longest_cut_off_ms,omitempty"` // the longest of those
	CDF             [][2]float64 `json:"cdf,omitempty"`                // [wait ms, fraction ≤]

	p50, p99, max time.Duration
	h             *hist
}

func newResult(sc, lib string, pr phaseResult) *Result {
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
		r.Commands = map[string]float64{}
		for k, v := range pr.sent.Commands {
			r.Commands[k] = float64(v) / float64(pr.ops)
		}
	}
	if sc == scOneKey {
		lo, hi := slices.Min(pr.perG), slices.Max(pr.perG)
		r.PerGoroutineMin, r.PerGoroutineMax = &lo, &hi
		r.CutOffWaits, r.LongestCutOffMs = pr.stuck, ms(pr.longest)
		for _, p := range h.cdf() {
			r.CDF = append(r.CDF, [2]float64{ms(p.D), p.F})
		}
	}
	return r
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
