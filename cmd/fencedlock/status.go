package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/internal/doctor"
	"github.com/fencedlock/fencedlock/redlock"
)

const statusHeader = `Usage: fencedlock status --nodes ADDRS --key KEY [--json]

Show, for each node, the value that holds KEY (or "-"), its PTTL, and the
fence counter that tokens for KEY are drawn from (one per hash slot, shared by
the keys of that slot); then whether a quorum (N/2+1 nodes) holds the same
value, and the range of the counters on those nodes. The holder's token is not
stored on the nodes: it was the highest counter when the hold was acquired, so
it is at most the top of that range, and equal to it while nodes are healthy
and no other key of the slot was locked since. Nodes that do not answer are
reported in their row, and named on stderr; fewer than 3 nodes draw a
warning there (no node of them may fail). 'fencedlock doctor' checks the
nodes' configuration.

When the holder is a 'fencedlock run', a "holder:" line gives its host and
pid: run keeps a record of itself next to the lock (the key
fencedlock:holder:{KEY}, "host pid token value", lasting as long as the
hold's validity). A holder that is not a 'fencedlock run' has no record,
and the line says so.
`

const statusFooter = nodesEnvHelp + `
Exit status:
  0   a quorum holds the key
  1   no quorum holds the key (the nodes that answered are enough to tell),
      or the report could not be written
  2   bad usage
  69  unknown: too few nodes answered to tell whether a quorum holds the key
      (also when no node answered)
`

// exitNotHeld is status's exit status when no quorum holds the key.
const exitNotHeld = 1

// nodeStatus is one node's row. Pointers are null in JSON when unknown or
// absent.
type nodeStatus struct {
	Addr   string  `json:"addr"`
	Holder *string `json:"holder"`          // the key's value; null when the key is absent
	PTTLMs *int64  `json:"pttl_ms"`         // null when the key is absent; -1: no expiry
	Fence  *uint64 `json:"fence"`           // the slot's fence counter; null when the node failed
	Error  string  `json:"error,omitempty"` // why the node did not answer

	record string // the holder record (holder.go), "" when absent

	unreachable error // the error, when the node did not answer at all (reach.go)
}

// quorumStatus says whether a quorum holds the key.
type quorumStatus struct {
	State    string  `json:"state"`            // "held", "free", or "unknown" (too many nodes failed to tell)
	Holder   string  `json:"holder,omitempty"` // the value on the most nodes
	Holders  int     `json:"holders"`          // nodes with that value
	Need     int     `json:"need"`             // N/2+1
	Answered int     `json:"answered"`         // nodes that answered
	TokenMin *uint64 `json:"token_min,omitempty"`
	TokenMax *uint64 `json:"token_max,omitempty"`
	// Run is the holder's record when the holder is a `fencedlock run`:
	// a record whose value is Holder, on a node that answered.
	Run *holderRecord `json:"run,omitempty"`
}

type statusReport struct {
	Key      string       `json:"key"`
	FenceKey string       `json:"fence_key"`
	Nodes    []nodeStatus `json:"nodes"`
	Quorum   quorumStatus `json:"quorum"`
}

// runStatus is `fencedlock status`.
func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("status", statusHeader, statusFooter)
	var f nodeFlags
	f.register(c.fs)
	asJSON := c.fs.Bool("json", false, "print JSON instead of a table")
	if code, ok := c.parse(args, stdout, stderr); !ok {
		return code
	}
	opts, err := f.options(os.Getenv)
	switch {
	case err != nil:
		return c.fail(stderr, "%v", err)
	case c.fs.NArg() > 0:
		return c.fail(stderr, "unexpected arguments: %s", strings.Join(c.fs.Args(), " "))
	}
	clients := dial(opts)
	defer closeAll(clients)
	warnTolerance(stderr, "status", len(clients))

	rep := statusReport{Key: f.key, FenceKey: redlock.FenceKey(f.key), Nodes: make([]nodeStatus, len(clients))}
	var wg sync.WaitGroup
	for i, rdb := range clients {
		wg.Go(func() { rep.Nodes[i] = queryNode(ctx, rdb, f.key, rep.FenceKey, holderKey(f.key), f.timeout) })
	}
	wg.Wait()
	rep.Quorum = summarize(rep.Nodes)

	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintf(stderr, "fencedlock status: %v\n", err)
			return exitFailure
		}
	} else {
		printStatus(stdout, &rep)
	}
	if rep.Quorum.Answered == 0 {
		var failed []string
		for _, n := range rep.Nodes {
			failed = append(failed, fmt.Sprintf("node %s: %s", n.Addr, n.Error))
		}
		fmt.Fprintf(stderr, "fencedlock status: no node answered:\n  %s\n", strings.Join(failed, "\n  "))
		return exitUnavailable
	}
	for _, n := range rep.Nodes {
		if n.unreachable != nil {
			fmt.Fprintf(stderr, "fencedlock status: warning: %s\n", unreachableLine(n.Addr, n.unreachable))
		}
	}
	switch rep.Quorum.State {
	case "held":
		return exitOK
	case "free":
		return exitNotHeld
	}
	return exitUnavailable
}

// queryNode reads the key, its PTTL, the fence counter and the holder
// record in one MULTI.
func queryNode(ctx context.Context, rdb *redis.Client, key, fenceKey, recordKey string, timeout time.Duration) nodeStatus {
	st := nodeStatus{Addr: rdb.Options().Addr}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var get *redis.StringCmd
	var pttl, fence, record *redis.Cmd
	_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		get = p.Get(ctx, key)
		pttl = p.Do(ctx, "PTTL", key)
		fence = p.Do(ctx, "GET", fenceKey)
		record = p.Do(ctx, "GET", recordKey)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		st.Error = describe(err)
		if doctor.Unreachable(err) {
			st.unreachable = err
		}
		return st
	}
	var counter uint64
	if s, err := fence.Text(); err == nil {
		if counter, err = strconv.ParseUint(s, 10, 64); err != nil {
			st.Error = fmt.Sprintf("fence counter %s is not a number: %q", fenceKey, s)
			return st
		}
	}
	st.Fence = &counter
	st.record, _ = record.Text()
	if v, err := get.Result(); err == nil {
		st.Holder = &v
		if ms, err := pttl.Int64(); err == nil && ms != -2 {
			st.PTTLMs = &ms
		}
	}
	return st
}

// summarize finds the value on the most nodes and whether that is a quorum.
func summarize(nodes []nodeStatus) quorumStatus {
	q := quorumStatus{Need: len(nodes)/2 + 1}
	count := make(map[string]int)
	for _, n := range nodes {
		if n.Error != "" {
			continue
		}
		q.Answered++
		if n.Holder != nil {
			count[*n.Holder]++
			if c := count[*n.Holder]; c > q.Holders || (c == q.Holders && *n.Holder < q.Holder) {
				q.Holder, q.Holders = *n.Holder, c
			}
		}
	}
	switch unanswered := len(nodes) - q.Answered; {
	case q.Holders >= q.Need:
		q.State = "held"
	case q.Holders+unanswered < q.Need:
		q.State = "free"
	default:
		q.State = "unknown"
	}
	if q.Holders > 0 {
		for _, n := range nodes {
			if rec, err := parseHolderRecord(n.record); q.Run == nil && err == nil && rec.Value == q.Holder {
				q.Run = &rec
			}
			if n.Holder == nil || *n.Holder != q.Holder {
				continue
			}
			if q.TokenMin == nil || *n.Fence < *q.TokenMin {
				q.TokenMin = n.Fence
			}
			if q.TokenMax == nil || *n.Fence > *q.TokenMax {
				q.TokenMax = n.Fence
			}
		}
	}
	return q
}

func printStatus(w io.Writer, rep *statusReport) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tHOLDER\tPTTL\tFENCE\tSTATUS")
	for _, n := range rep.Nodes {
		if n.Error != "" {
			fmt.Fprintf(tw, "%s\t?\t?\t?\t%s\n", n.Addr, n.Error)
			continue
		}
		holder, pttl := "-", "-"
		if n.Holder != nil {
			holder = *n.Holder
		}
		switch {
		case n.PTTLMs == nil:
		case *n.PTTLMs < 0:
			pttl = "no expiry"
		default:
			pttl = (time.Duration(*n.PTTLMs) * time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\tok\n", n.Addr, holder, pttl, *n.Fence)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "key %q, fence counter %s\n", rep.Key, rep.FenceKey)
	fmt.Fprintln(w, quorumLine(rep))
	if q := rep.Quorum; q.Holders > 0 {
		if q.Run != nil {
			fmt.Fprintf(w, "holder: fencedlock run on host %s, pid %d, token %d\n", q.Run.Host, q.Run.PID, q.Run.Token)
		} else {
			fmt.Fprintf(w, "holder: %s has no holder record (not a 'fencedlock run', or its record did not reach the nodes)\n", q.Holder)
		}
	}
}

func quorumLine(rep *statusReport) string {
	q := rep.Quorum
	n := len(rep.Nodes)
	on := fmt.Sprintf("on %d/%d nodes (quorum %d)", q.Holders, n, q.Need)
	switch {
	case q.State == "held":
		return fmt.Sprintf("quorum: held by %s %s, token range %d..%d", q.Holder, on, *q.TokenMin, *q.TokenMax)
	case q.State == "unknown" && q.Holders > 0:
		return fmt.Sprintf("quorum: unknown: %s %s, %s did not answer", q.Holder, on, nodeCount(n-q.Answered))
	case q.Answered == 0:
		return "quorum: unknown: no node answered"
	case q.State == "unknown":
		return fmt.Sprintf("quorum: unknown: no holder on the %s that answered, %d did not (quorum %d)",
			nodeCount(q.Answered), n-q.Answered, q.Need)
	case q.Holders > 0:
		return fmt.Sprintf("quorum: not held: %s on only %d/%d nodes (quorum %d)", q.Holder, q.Holders, n, q.Need)
	}
	return "quorum: not held"
}

func nodeCount(n int) string {
	if n == 1 {
		return "1 node"
	}
	return strconv.Itoa(n) + " nodes"
}
