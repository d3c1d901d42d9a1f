package chaos

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/fencedlock/fencedlock/chaos/backend"
	"github.com/fencedlock/fencedlock/chaos/history"
)

// Config describes a chaos run. A zero Config is valid: 5 process nodes, 8
// clients, 20s, the faults the algorithm tolerates.
type Config struct {
	Nodes    int           // lock nodes; default 5
	Clients  int           // workload clients, each its own redlock.Client; default 8
	Duration time.Duration // how long the workload runs; default 20s
	// Faults to inject, by name: the node kinds of package backend, the
	// client kinds "client-pause" and "client-clock-skew", and
	// "kill-during-acquire". Default: Tolerated().
	Faults []string
	Seed   uint64 // seeds the fault schedule; default 1
	// Backend is "process" (local redis-server processes, the default) or
	// "docker" (containers; see NewDocker).
	Backend string
	TTL     time.Duration // lock TTL; default 1s
	// NodeTimeout bounds each node call of the workload's clients; default 100ms.
	NodeTimeout time.Duration
	// Progress, if set, gets a live progress line every second.
	Progress io.Writer
}

// Fault names beyond package backend's node kinds.
const (
	ClientPause       = "client-pause"        // a holder stops past its validity before it writes
	ClientClockSkew   = "client-clock-skew"   // a client whose clock runs at half speed works to its validity
	KillDuringAcquire = "kill-during-acquire" // a node is killed while an acquire's script is on its way
)

// Tolerated returns the faults under which the algorithm's assumptions hold:
// the checker must find no violation under them.
func Tolerated() []string {
	return []string{"kill", "restart", "delayed-restart", "pause", "partition", "latency", KillDuringAcquire}
}

// AssumptionBreaking returns the faults that break an assumption of the
// lock (timing, or nodes keeping their data): mutual exclusion may fail
// under them, and the report says so; the fenced store must stay correct.
func AssumptionBreaking() []string {
	return []string{ClientPause, ClientClockSkew, "clock-skew", "restart-without-data"}
}

// AllFaults returns every fault name, in a fixed order.
func AllFaults() []string {
	var all []string
	for _, k := range backend.Kinds() {
		all = append(all, string(k))
	}
	return append(all, ClientPause, ClientClockSkew, KillDuringAcquire)
}

// ErrConfig is wrapped by the errors of a bad Config.
var ErrConfig = errors.New("chaos: bad configuration")

// ParseFaults splits a comma-separated list of fault names and checks them.
func ParseFaults(s string) ([]string, error) {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" || slices.Contains(out, f) {
			continue
		}
		if !slices.Contains(AllFaults(), f) {
			return nil, fmt.Errorf("%w: unknown fault %q (known: %s)", ErrConfig, f, strings.Join(AllFaults(), ","))
		}
		out = append(out, f)
	}
	return out, nil
}

func (c Config) withDefaults() (Config, error) {
	if c.Nodes == 0 {
		c.Nodes = 5
	}
	if c.Clients == 0 {
		c.Clients = 8
	}
	if c.Duration == 0 {
		c.Duration = 20 * time.Second
	}
	if c.Faults == nil {
		c.Faults = Tolerated()
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.Backend == "" {
		c.Backend = "process"
	}
	if c.TTL == 0 {
		c.TTL = time.Second
	}
	if c.NodeTimeout == 0 {
		c.NodeTimeout = 100 * time.Millisecond
	}
	switch {
	case c.Nodes < 1 || c.Nodes > 15:
		return c, fmt.Errorf("%w: %d nodes (want 1 to 15)", ErrConfig, c.Nodes)
	case c.Clients < 1 || c.Clients > 256:
		return c, fmt.Errorf("%w: %d clients (want 1 to 256)", ErrConfig, c.Clients)
	case c.Duration < 100*time.Millisecond:
		return c, fmt.Errorf("%w: duration %v (want at least 100ms)", ErrConfig, c.Duration)
	case c.TTL < 50*time.Millisecond:
		return c, fmt.Errorf("%w: ttl %v (want at least 50ms)", ErrConfig, c.TTL)
	case c.NodeTimeout <= 0 || c.NodeTimeout >= c.TTL/2:
		return c, fmt.Errorf("%w: node timeout %v (want below half the ttl %v)", ErrConfig, c.NodeTimeout, c.TTL)
	case c.Backend != "process" && c.Backend != "docker":
		return c, fmt.Errorf("%w: backend %q (want process or docker)", ErrConfig, c.Backend)
	}
	for _, f := range c.Faults {
		if !slices.Contains(AllFaults(), f) {
			return c, fmt.Errorf("%w: unknown fault %q", ErrConfig, f)
		}
	}
	return c, nil
}

// nodeKinds are the faults of c that package backend's plan injects.
func (c Config) nodeKinds() []backend.Kind {
	var ks []backend.Kind
	for _, k := range backend.Kinds() {
		if slices.Contains(c.Faults, string(k)) {
			ks = append(ks, k)
		}
	}
	return ks
}

func (c Config) has(fault string) bool { return slices.Contains(c.Faults, fault) }

// expected maps each property to the faults that may break it: the
// checker's default, which matches AssumptionBreaking.
func expected() map[history.Property][]history.FaultKind { return history.DefaultExpected() }
