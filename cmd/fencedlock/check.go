package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/fencedlock/fencedlock/chaos/checker"
	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/history"
	"github.com/fencedlock/fencedlock/chaos/report"
)

const checkHeader = `Usage:
  fencedlock check [--nodes N] [--clock-error D] [--strict] [--stall-threshold D]
                   [--starvation-threshold D] [--handover-threshold D] [--order-margin D]
                   [--release-allowance D] [--json FILE] [--html FILE] FILE

Checks a history of lock operations recorded by any system — one JSON object
per line (JSON Lines): acquire, extend, release, write and lost operations of
clients on lock keys, with invoke and complete times on one clock, tokens,
validity ends and outcomes; optionally faults, the final store contents and
the node count. Package recorder writes it from Go programs; 'fencedlock chaos
--history FILE' writes a chaos run's. FILE - reads standard input. The format
is in docs/history-format.md. A history without a version on its run line
(version 1) is read by the version 1 rules, with warnings on stderr.

Two times on different lines count as ordered only when they differ by more
than the clock error: how far the clocks that stamped the lines may disagree,
the run line's clock_error_ns (default 0: one clock), or --clock-error. Two
holds that overlap by no more than it are not a violation.

The checker is the chaos run's: mutual exclusion, fencing order, duplicate
tokens, stale writes accepted, lost writes (when the final store contents are
given), liveness and starvation (when the node count is given), and how fast
keys pass from a release to their waiters (handover), and, with --order-margin,
clients overtaken by one that began waiting after them (order: for locks that
serve waiters in the order they began), and from probe lines (reads of the
lock nodes) the node guarantees: Until within what a quorum of nodes holds,
Unlock's result, and, with --release-allowance, grants left behind; the same
text summary, JSON report and HTML timeline.
`

const checkFooter = `Exit status:
  0  verdict ok: no violation the recorded faults do not explain
  1  a violation under faults that should not cause one
  2  bad usage, or a history that cannot be read (the error names the line and the field)
  3  verdict unknown (too little happened, operations that never completed,
     or faults that could not be injected)
`

func runCheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := newCommand("check", checkHeader, checkFooter)
	fs := cmd.fs
	var nodeCount countFlag
	fs.Var(&nodeCount, "nodes", "the history has `N` lock nodes, a count, not addresses: a quorum for liveness (default: its run line's)")
	clockErr := fs.Duration("clock-error", 0,
		"the history's timestamps may disagree by up to `D` (default: its run line's clock_error_ns, else 0)")
	strict := fs.Bool("strict", false, "count every violation, even under faults that break the lock's assumptions")
	stall := fs.Duration("stall-threshold", 0, "liveness allows stalls up to `D` (default: derived from the history, per key)")
	starved := fs.Duration("starvation-threshold", 0,
		"a client may wait up to `D` for a key others keep getting (default: derived from the history, per key)")
	handover := fs.Duration("handover-threshold", 0,
		"keys may take a median `D` from a release to the next acquire while others wait (default: derived from the history)")
	margin := fs.Duration("order-margin", 0,
		"judge order: a client that began waiting more than `D` after another, while the key was held, must not get it first (default 0: not judged)")
	allowance := fs.Duration("release-allowance", 0,
		"judge leftover grants: `D` after a failed acquire or a release returned, probes must not find what it left on a node (default 0: not judged)")
	jsonPath := fs.String("json", "", "write the JSON report to `FILE`")
	htmlPath := fs.String("html", "", "write the HTML timeline to `FILE`")
	if code, ok := cmd.parse(args, stdout, stderr); !ok {
		return code
	}
	nodes, err := nodeCount.value("the lock nodes the history was recorded with",
		"check reads a recorded history and talks to no node (to check nodes, use 'fencedlock doctor --nodes ADDRS')")
	if err != nil {
		return cmd.fail(stderr, "%v", err)
	}
	switch {
	case fs.NArg() != 1:
		return cmd.fail(stderr, "want one history FILE, got %d arguments", fs.NArg())
	case nodes < 0:
		return cmd.fail(stderr, "--nodes must not be negative")
	case *clockErr < 0:
		return cmd.fail(stderr, "--clock-error must not be negative")
	case *stall < 0:
		return cmd.fail(stderr, "--stall-threshold must not be negative")
	case *starved < 0:
		return cmd.fail(stderr, "--starvation-threshold must not be negative")
	case *handover < 0:
		return cmd.fail(stderr, "--handover-threshold must not be negative")
	case *margin < 0:
		return cmd.fail(stderr, "--order-margin must not be negative")
	case *allowance < 0:
		return cmd.fail(stderr, "--release-allowance must not be negative")
	}
	h, warnings, err := readHistory(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "fencedlock check: %v\n", err)
		return exitUsage
	}
	for _, w := range warnings {
		fmt.Fprintf(stderr, "fencedlock check: warning: %s: %s\n", fs.Arg(0), w)
	}
	if nodes > 0 {
		h.Nodes = nodes
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "clock-error" { // 0 too: it overrides what the history says
			h.ClockError = *clockErr
		}
	})
	opts := checker.CheckOptions{StallThreshold: *stall, StarvationThreshold: *starved, HandoverThreshold: *handover, OrderMargin: *margin,
		ReleaseAllowance: *allowance}
	if *strict {
		opts.Expected = map[checker.Property][]fault.Kind{}
	}
	run := report.Run{Nodes: h.Nodes, Clients: clients(h), Duration: h.End, History: h, Result: checker.Check(h, opts)}
	if code, ok := writeReports(run, *jsonPath, *htmlPath, stdout, stderr, "check"); !ok {
		return code
	}
	return verdictStatus(run.Result.Verdict)
}

func readHistory(path string) (history.History, []history.Warning, error) {
	if path == "-" {
		return history.ReadJSONLWarn(os.Stdin)
	}
	f, err := os.Open(path)
	if err != nil {
		return history.History{}, nil, err
	}
	defer f.Close()
	h, warnings, err := history.ReadJSONLWarn(f)
	if err != nil {
		return history.History{}, nil, fmt.Errorf("%s: %w", path, err)
	}
	return h, warnings, nil
}

// clients counts the clients of h: one more than the highest index.
func clients(h history.History) int {
	n := len(h.Clients)
	for _, op := range h.Ops {
		if op.Kind != history.KindFault || op.Fault.ClientSide() {
			n = max(n, op.Client+1)
		}
	}
	return n
}
