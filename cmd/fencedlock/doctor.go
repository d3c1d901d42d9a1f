package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fencedlock/fencedlock/internal/doctor"
)

const doctorHeader = `Usage: fencedlock doctor --nodes ADDRS [--ttl D] [--replica-acks N] [--json]

Check each node, and the set of nodes, against what the lock's guarantees
rest on (docs/doctor.md explains each check and its fix):
  reach        the node answers PING
  role         an independent primary: not a replica, no replicas unless the
               lock waits for them (--replica-acks); no server listed twice
  persistence  appendonly yes and appendfsync always: fence counters survive
               a restart
  eviction     maxmemory-policy noeviction: fence counters and lock keys are
               never evicted
  clock        the node's clock rate and offset, against this machine's and
               the other nodes', within the drift allowance for --ttl
  latency      round trips well inside the node timeout for --ttl
  scripting    EVALSHA and EVAL work; the server version and its native
               compare-and-delete
  acl          the user may run every command the lock uses
  quorum       at least 3 nodes, so that one may fail
Each finding is ok, warn or fail, with the reason and the fix. The clock
check spends up to a second measuring the clocks' rates.
`

const doctorFooter = nodesEnvHelp + `
Exit status:
  0   every finding is ok
  1   a warning, and no failure
  2   bad usage
  3   a failure
  69  a node did not answer, and no failure
`

// exitDoctorFail is doctor's status for a failed check.
const exitDoctorFail = 3

// runDoctor is `fencedlock doctor`.
func runDoctor(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("doctor", doctorHeader, doctorFooter)
	var (
		nodes  nodeSource
		ttl    time.Duration
		acks   int
		asJSON bool
	)
	nodes.register(c.fs)
	c.fs.DurationVar(&ttl, "ttl", doctor.DefaultTTL, "the lock's time-to-live: the drift allowance and the node timeout derive from it")
	c.fs.IntVar(&acks, "replica-acks", 0, "replicas each write waits for (redlock.WithReplicaAcks)")
	c.fs.BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	bad := func(format string, a ...any) int { return c.fail(stderr, format, a...) }
	if code, ok := c.parse(args, stdout, stderr); !ok {
		return code
	}
	switch {
	case ttl <= 0:
		return bad("--ttl %v is not positive", ttl)
	case ttl <= doctor.DriftAllowance(ttl):
		return bad("--ttl %v leaves no validity: the lock gives up %v of it for clock drift", ttl, doctor.DriftAllowance(ttl))
	case acks < 0:
		return bad("--replica-acks %d is negative", acks)
	case c.fs.NArg() > 0:
		return bad("unexpected arguments: %s", strings.Join(c.fs.Args(), " "))
	}
	opts, err := nodes.options(defaultNodeTimeout, os.Getenv)
	if err != nil {
		return bad("%v", err)
	}
	clients := dial(opts)
	defer closeAll(clients)
	checked := make([]doctor.Node, len(clients))
	for i, rdb := range clients {
		checked[i] = doctor.Node{Addr: opts[i].Addr, Client: rdb}
	}
	rep := doctor.Run(ctx, checked, doctor.Config{TTL: ttl, ReplicaAcks: acks})
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintf(stderr, "fencedlock doctor: %v\n", err)
			return exitFailure
		}
	} else {
		printDoctor(stdout, rep)
	}
	switch worst := rep.Worst(); {
	case worst == doctor.Fail:
		return exitDoctorFail
	case len(rep.Unreachable) > 0:
		return exitUnavailable
	case worst == doctor.Warn:
		return exitFailure
	}
	return exitOK
}

func printDoctor(w io.Writer, rep *doctor.Report) {
	fmt.Fprintf(w, "ttl %v: drift allowance %v, node timeout %v\n\n", rep.TTL, rep.DriftAllowance, rep.NodeTimeout)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tCHECK\tSTATUS\tREASON")
	for _, f := range rep.Findings {
		node := f.Node
		if node == "" {
			node = "(all)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", node, f.Check, f.Status, f.Reason)
		if f.Fix != "" {
			fmt.Fprintf(tw, "\t\t\tfix: %s\n", f.Fix)
		}
	}
	_ = tw.Flush()
}
