package backend

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Fault is one node fault. Inject applies it to b and returns undo, which
// ends it (heals, resumes, starts the node again); undo is nil for a fault
// that is over when Inject returns, such as a restart. Faults are values:
// one Fault can be injected many times.
type Fault interface {
	Inject(ctx context.Context, b Backend) (undo func(ctx context.Context) error, err error)
}

// Kind names a kind of fault, as the CLI's --faults flag spells it.
type Kind string

// The fault kinds NewPlan draws from.
const (
	KindKill               Kind = "kill"                 // Kill, held, then started with its data
	KindRestart            Kind = "restart"              // Restart with data (nothing acknowledged is lost: AOF, fsync always)
	KindRestartWithoutData Kind = "restart-without-data" // Restart empty: breaks fencing's assumptions on purpose
	KindDelayedRestart     Kind = "delayed-restart"      // DelayedRestart: down longer than the max TTL, back empty
	KindPause              Kind = "pause"                // Pause, held, then resumed
	KindPartition          Kind = "partition"            // Partition, held, then healed
	KindLatency            Kind = "latency"              // Latency, held, then removed
	KindClockSkew          Kind = "clock-skew"           // ClockSkew, held, then back on the real clock
)

// Kinds returns every fault kind, in a fixed order.
func Kinds() []Kind {
	return []Kind{
		KindKill, KindRestart, KindRestartWithoutData, KindDelayedRestart,
		KindPause, KindPartition, KindLatency, KindClockSkew,
	}
}

// ErrUnknownKind is returned for a fault kind this package does not know.
var ErrUnknownKind = errors.New("backend: unknown fault kind")

// ParseKinds parses a comma-separated list of kinds ("kill,pause,latency"),
// ignoring spaces and repeats. An empty list is an error.
func ParseKinds(s string) ([]Kind, error) {
	known := make(map[Kind]bool)
	for _, k := range Kinds() {
		known[k] = true
	}
	var kinds []Kind
	seen := make(map[Kind]bool)
	for f := range strings.SplitSeq(s, ",") {
		k := Kind(strings.TrimSpace(f))
		if k == "" {
			continue
		}
		if !known[k] {
			return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownKind, k, kindList())
		}
		if !seen[k] {
			seen[k] = true
			kinds = append(kinds, k)
		}
	}
	if len(kinds) == 0 {
		return nil, fmt.Errorf("backend: no fault kinds in %q (known: %s)", s, kindList())
	}
	return kinds, nil
}

func kindList() string {
	var b strings.Builder
	for i, k := range Kinds() {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(string(k))
	}
	return b.String()
}
