package mutants

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/fencedlock/fencedlock/chaos/checker"
	"github.com/fencedlock/fencedlock/chaos/report"
)

// Chaos is the chaos run a campaign makes against each mutant. The zero
// Chaos is valid.
type Chaos struct {
	Faults   string        // the --faults list; default "hunt"
	Seed     uint64        // the --seed; default 1
	Duration time.Duration // the --duration; default 60s
	Args     []string      // more flags for `fencedlock chaos`, e.g. --nodes 3
}

func (c Chaos) withDefaults() Chaos {
	c.Faults = cmp.Or(c.Faults, "hunt")
	c.Seed = cmp.Or(c.Seed, 1)
	c.Duration = cmp.Or(c.Duration, 60*time.Second)
	return c
}

// Outcome is what a chaos run made of a mutant.
type Outcome string

// The outcomes.
const (
	Killed   Outcome = "killed"   // a violation that no injected fault explains (exit status 1)
	Survived Outcome = "survived" // verdict ok (exit status 0)
	Unknown  Outcome = "unknown"  // verdict unknown (exit status 3): too little happened, or faults failed
)

// Result is one chaos run against one mutant (or the original module).
type Result struct {
	Mutant  Mutant
	Outcome Outcome
	Seed    uint64
	Elapsed time.Duration // wall time of the chaos run
	// KilledAt is when the first violation no fault explains ended, on the
	// run's clock (killed only); for a property judged on the whole run
	// (lost writes, liveness, starvation, handover), the end of the run.
	KilledAt time.Duration
	Evidence string // the first such violation: property, ops, detail; or the verdict's reason
	Report   report.Report
}

// Run builds m from a copy of the module at root (in a directory under
// tmp, removed afterwards) and runs `fencedlock chaos` against it with
// --stop-on-violation. An error means the run did not happen or gave no
// report: not an outcome.
func Run(ctx context.Context, root, tmp string, m Mutant, c Chaos) (Result, error) {
	c = c.withDefaults()
	bin, err := Build(ctx, root, tmp, m)
	if bin != "" {
		defer os.RemoveAll(filepath.Dir(bin))
	}
	if err != nil {
		return Result{}, err
	}
	jsonPath := filepath.Join(filepath.Dir(bin), "report.json")
	args := []string{"chaos", "--faults", c.Faults}
	if m.Quiet {
		args = append([]string{"chaos"}, QuietArgs...)
	}
	if m.Lock != "" {
		args = append(args, "--lock", m.Lock)
	}
	args = append(append(args, "--seed", strconv.FormatUint(c.Seed, 10),
		"--duration", c.Duration.String(), "--json", jsonPath, "--quiet", "--stop-on-violation"), c.Args...)
	cmd := exec.CommandContext(ctx, bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	err = cmd.Run()
	res := Result{Mutant: m, Seed: c.Seed, Elapsed: time.Since(start)}
	status := 0
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		status = ee.ExitCode()
	} else if err != nil {
		return res, err
	}
	raw, rerr := os.ReadFile(jsonPath)
	if status == 2 || rerr != nil {
		return res, fmt.Errorf("mutants: %s: chaos exited %d without a report: %s", name(m), status, lastLines(stderr.String(), 5))
	}
	if err := json.Unmarshal(raw, &res.Report); err != nil {
		return res, fmt.Errorf("mutants: %s: reading the report: %w", name(m), err)
	}
	switch status {
	case 0:
		res.Outcome, res.Evidence = Survived, res.Report.Reason
	case 1:
		res.Outcome = Killed
		res.KilledAt, res.Evidence = evidence(res.Report)
	default:
		res.Outcome, res.Evidence = Unknown, res.Report.Reason
	}
	return res, nil
}

// evidence returns when the earliest unexpected violation of r was known
// (see Result.KilledAt) and a line that describes it.
func evidence(r report.Report) (time.Duration, string) {
	var first *report.Example
	var at float64 // ms
	for i, e := range r.Examples {
		known := e.EndMs
		switch e.Property {
		case checker.LostWrites, checker.LivenessStall, checker.LivenessStarvation, checker.SlowHandover:
			known = r.DurationS * 1000 // judged at the end of the run
		}
		if !e.Expected && (first == nil || known < at) {
			first, at = &r.Examples[i], known
		}
	}
	if first == nil {
		return 0, r.Reason
	}
	return time.Duration(at * float64(time.Millisecond)),
		fmt.Sprintf("%s, ops %v: %s", first.Property, first.Ops, first.Detail)
}

func name(m Mutant) string {
	if m.Name == "" && m.Lock != "" {
		return "original (" + m.Lock + ")"
	}
	return cmp.Or(m.Name, "original")
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
