package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fencedlock/fencedlock/bench/contender"
)

// Report is everything one run measured; it is also the JSON file.
type Report struct {
	Machine   Machine      `json:"machine"`
	Settings  Settings     `json:"settings"`
	Results   []*Result    `json:"results"`
	Ratios    []Ratio      `json:"ratios"`
	ManyHolds []*ManyHolds `json:"many_holds,omitempty"`
}

// Machine describes where the run happened.
type Machine struct {
	CPU        string `json:"cpu"`
	Cores      int    `json:"cores"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	Go         string `json:"go"`
	OSArch     string `json:"os_arch"`
	Redis      string `json:"redis"`
	Nodes      int    `json:"nodes"`
	OwnNodes   bool   `json:"own_nodes"` // started by lockbench (else --nodes)
}

// Settings are the flags that shaped the run.
type Settings struct {
	Scenarios        []string `json:"scenarios"`
	Libraries        []string `json:"libraries"`
	Duration         string   `json:"duration"`
	Warmup           string   `json:"warmup"`
	Ops              int64    `json:"ops,omitempty"`
	Rounds           int      `json:"rounds"`
	Goroutines       int      `json:"goroutines"`
	Waiters          int      `json:"waiters"`
	Clients          int      `json:"clients"`
	ClientGoroutines int      `json:"client_goroutines"`
	Hold             string   `json:"hold"`
	TTL              string   `json:"ttl"`
	NodeTimeout      string   `json:"node_timeout"`
	RetryDelay       string   `json:"redislock_retry_delay"`
	RedsyncTries     int      `json:"redsync_tries"`
	RedsyncFactor    float64  `json:"redsync_paused_timeout_factor"`
}

// Ratio is one target of the performance issue, or a cost with no target,
// measured side by side.
type Ratio struct {
	Name   string   `json:"name"`
	Value  *float64 `json:"value"`  // null when a side was not measured
	Target string   `json:"target"` // "" when there is none
	Status string   `json:"status"` // "met", "MISSED", "measured" (no target) or "n/a"
	Note   string   `json:"note,omitempty"`
}

func (rep *Report) find(sc, lib string) *Result {
	for _, r := range rep.Results {
		if r.Scenario == sc && r.Library == lib {
			return r
		}
	}
	return nil
}

// computeRatios fills rep.Ratios from the results.
func (rep *Report) computeRatios() {
	const fl, rs, raw = contender.Fencedlock, contender.Redsync, contender.Raw
	type side struct {
		sc, lib string
		val     func(*Result) float64
	}
	p50 := func(r *Result) float64 { return r.P50Ms }
	p99 := func(r *Result) float64 { return r.P99Ms }
	rate := func(r *Result) float64 { return r.OpsPerSec }
	allocs := func(r *Result) float64 { return r.AllocsPerOp }
	value := func(num, den side) *float64 {
		a, b := rep.find(num.sc, num.lib), rep.find(den.sc, den.lib)
		if a == nil || b == nil || a.Ops == 0 || b.Ops == 0 || den.val(b) <= 0 {
			return nil
		}
		v := num.val(a) / den.val(b)
		return &v
	}
	add := func(name string, num, den side, atMost bool, target float64, note string) {
		ratio := Ratio{Name: name, Status: "n/a", Note: note, Value: value(num, den)}
		if atMost {
			ratio.Target = fmt.Sprintf("≤ %g", target)
		} else {
			ratio.Target = fmt.Sprintf("≥ %g", target)
		}
		if v := ratio.Value; v != nil {
			if (atMost && *v <= target) || (!atMost && *v >= target) {
				ratio.Status = "met"
			} else {
				ratio.Status = "MISSED"
			}
		}
		rep.Ratios = append(rep.Ratios, ratio)
	}
	// measured adds a ratio that has no target: a cost to know, not to meet.
	measured := func(name string, num, den side, note string) {
		ratio := Ratio{Name: name, Status: "n/a", Note: note, Value: value(num, den)}
		if ratio.Value != nil {
			ratio.Status = "measured"
		}
		rep.Ratios = append(rep.Ratios, ratio)
	}
	add("serial p50: fencedlock / raw", side{scSerial, fl, p50}, side{scSerial, raw, p50}, true, 1.1, "")
	add("serial p50: fencedlock / redsync", side{scSerial, fl, p50}, side{scSerial, rs, p50}, true, 1.0, "")
	add("parallel ops/s: fencedlock / redsync", side{scParallel, fl, rate}, side{scParallel, rs, rate}, false, 2, "")
	add("onekey acq/s: fencedlock / redsync", side{scOneKey, fl, rate}, side{scOneKey, rs, rate}, false, 1, "")
	note := ""
	if a, b := rep.find(scOneKey, fl), rep.find(scOneKey, rs); a != nil && b != nil {
		note = fmt.Sprintf("max wait: fencedlock %s, redsync %s", fmtMs(a.MaxMs), fmtMs(b.MaxMs))
	}
	add("onekey wait p99: fencedlock / redsync", side{scOneKey, fl, p99}, side{scOneKey, rs, p99}, true, 0.25, note)
	add("paused p50 / healthy p50: fencedlock", side{scPaused, fl, p50}, side{scPausedBase, fl, p50}, true, 1.5,
		"healthy = paused-base: same client, same settings, all nodes up")
	add("serial allocs/op: fencedlock / redsync", side{scSerial, fl, allocs}, side{scSerial, rs, allocs}, true, 1, "")
	add("multiclient acq/s: fencedlock / redsync", side{scMultiClient, fl, rate}, side{scMultiClient, rs, rate}, false, 1, "")
	add("multiclient wait p99: fencedlock / redsync", side{scMultiClient, fl, p99}, side{scMultiClient, rs, p99}, true, 0.25,
		rep.waitNote(scMultiClient))
	add("multiclient-down acq/s: fencedlock / its healthy", side{scMultiClientDown, fl, rate}, side{scMultiClient, fl, rate}, false, 0.5,
		"healthy = multiclient: same clients, same settings, all nodes up")
	add("multiclient-down wait p99: fencedlock / redsync", side{scMultiClientDown, fl, p99}, side{scMultiClientDown, rs, p99}, true, 0.25,
		rep.waitNote(scMultiClientDown))
	add("multiclient-defaults-down acq/s: fencedlock / its healthy", side{scMultiClientDefaultsDown, fl, rate},
		side{scMultiClientDefaults, fl, rate}, false, 0.5,
		"each library's default node timeout (TTL/20); healthy = multiclient-defaults: same clients, all nodes up")
	add("multiclient-defaults-down acq/s: fencedlock / redsync", side{scMultiClientDefaultsDown, fl, rate},
		side{scMultiClientDefaultsDown, rs, rate}, false, 1, rep.waitNote(scMultiClientDefaultsDown))
	const acks = contender.FencedlockAcks
	measured("replicas p50: fencedlock-acks / fencedlock", side{scReplicas, acks, p50}, side{scReplicas, fl, p50},
		"one replica per node; serial TryLock+Unlock, the acquire waits for WAIT 1")
	measured("replicas parallel ops/s: fencedlock-acks / fencedlock", side{scReplicasParallel, acks, rate},
		side{scReplicasParallel, fl, rate}, "one replica per node; goroutines on distinct keys")
}

// waitNote compares fencedlock's and redsync's longest waits in sc, and the
// waits the end of the run cut off, which no percentile includes.
func (rep *Report) waitNote(sc string) string {
	a, b := rep.find(sc, contender.Fencedlock), rep.find(sc, contender.Redsync)
	if a == nil || b == nil {
		return ""
	}
	return fmt.Sprintf("max wait: fencedlock %s, redsync %s; cut off: %d, %d", fmtMs(a.MaxMs), fmtMs(b.MaxMs), a.CutOffWaits, b.CutOffWaits)
}

// printTable writes the results and the ratios as aligned text.
func (rep *Report) printTable(w io.Writer) {
	fmt.Fprintf(w, "\n%s, %d cores (GOMAXPROCS %d), %s, %s, %d nodes\n",
		rep.Machine.CPU, rep.Machine.Cores, rep.Machine.GOMAXPROCS, rep.Machine.Go, rep.Machine.Redis, rep.Machine.Nodes)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tlibrary\tops\tops/s\tp50\tp99\tmax\tallocs/op\tB/op\tcmds/op\ttrips/op\terrors\t")
	for _, r := range rep.Results {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.0f\t%s\t%s\t%s\t%.1f\t%.0f\t%.1f\t%.1f\t%d\t\n", r.Scenario, r.Library, r.Ops, r.OpsPerSec,
			fmtMs(r.P50Ms), fmtMs(r.P99Ms), fmtMs(r.MaxMs), r.AllocsPerOp, r.BytesPerOp, r.CmdsPerOp, r.TripsPerOp, r.Errors)
	}
	tw.Flush()
	rep.printFairness(w, scOneKey, scOneKey)
	rep.printFairness(w, scMultiClient, scMultiClient, scMultiClientDown)
	rep.printFairness(w, scMultiClientDefaults, scMultiClientDefaults, scMultiClientDefaultsDown)
	rep.printReplicaAcks(w)
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ratio\tvalue\ttarget\tstatus\tnote")
	for _, r := range rep.Ratios {
		v, target := "-", r.Target
		if r.Value != nil {
			v = fmt.Sprintf("%.2f", *r.Value)
		}
		if target == "" {
			target = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Name, v, target, r.Status, r.Note)
	}
	tw.Flush()
	rep.printManyHolds(w)
}

// printFairness lists, for the rows of scenarios scs, how the acquisitions
// spread over the goroutines (and the instances, in multiclient).
func (rep *Report) printFairness(w io.Writer, title string, scs ...string) {
	var fair []string
	for _, r := range rep.Results {
		if !slices.Contains(scs, r.Scenario) || r.PerGoroutineMin == nil {
			continue
		}
		line := "  "
		if len(scs) > 1 {
			line += fmt.Sprintf("%-17s ", r.Scenario)
		}
		line += fmt.Sprintf("%-17s per-goroutine acquisitions min %d max %d", r.Library, *r.PerGoroutineMin, *r.PerGoroutineMax)
		if r.PerClientMin != nil {
			line += fmt.Sprintf(", per-client (%d) min %d max %d", r.Clients, *r.PerClientMin, *r.PerClientMax)
		}
		fair = append(fair, line+fmt.Sprintf("; waits cut off by the end: %d (longest %s)", r.CutOffWaits, fmtMs(r.LongestCutOffMs)))
	}
	if len(fair) > 0 {
		fmt.Fprintf(w, "\n%s fairness:\n%s\n", title, strings.Join(fair, "\n"))
	}
}

func (rep *Report) writeJSON(path string) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// fmtDur prints a duration with three significant digits.
func fmtDur(d time.Duration) string { return fmtMs(ms(d)) }

func fmtMs(v float64) string {
	switch {
	case v <= 0:
		return "0"
	case v < 1:
		return fmt.Sprintf("%.0fµs", v*1000)
	case v < 10:
		return fmt.Sprintf("%.2fms", v)
	case v < 100:
		return fmt.Sprintf("%.1fms", v)
	case v < 1000:
		return fmt.Sprintf("%.0fms", v)
	default:
		return fmt.Sprintf("%.2fs", v/1000)
	}
}
