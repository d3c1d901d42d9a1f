package chaos

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/fencedlock/fencedlock/chaos/backend"
	"github.com/fencedlock/fencedlock/chaos/fault"
)

// Config describes a chaos run. A zero Config is valid: 5 process nodes, 8
// clients, 20s, the faults the algorithm tolerates.
type Config struct {
	Nodes    int           // lock nodes; default 5
	Clients  int           // workload clients, each its own redlock.Client; default 8
	Duration time.Duration // how long the workload runs; default 20s
	// Faults to inject: any kinds of package fault. Nil means
	// fault.Tolerated(); an empty non-nil list, no faults at all.
	Faults []fault.Kind
	Seed   uint64 // seeds the fault schedule; default 1
	// Backend is "process" (local redis-server processes, the default) or
	// "docker" (containers; see package backend/docker).
	Backend string
	TTL     time.Duration // lock TTL; default 1s
	// NodeTimeout bounds each node call of the workload's clients; default 100ms.
	NodeTimeout time.Duration
	// Strict counts every violation as unexpected, even under faults that
	// break an assumption of the lock (history.DefaultExpected otherwise).
	Strict bool
	// StopOnViolation ends the run early, within about a quarter of a second
	// of the first safety violation that no fault explains (the history is
	// checked as it grows); the run is then checked and reported as usual,
	// up to that point. Default false: the run lasts Duration.
	StopOnViolation bool
	// Progress, if set, gets a live progress line every second.
	Progress io.Writer
}

// FaketimeEnv names the environment variable that gives the path of
// libfaketime.so.1, which clock-skew faults on the process backend preload
// into redis-server. Unset: found where Debian and a source install put it.
// (The docker backend uses the libfaketime inside its image.)
const FaketimeEnv = "FENCEDLOCK_LIBFAKETIME"

// ErrConfig is wrapped by the errors of a bad Config.
var ErrConfig = errors.New("chaos: bad configuration")

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
		c.Faults = fault.Tolerated()
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
	for _, k := range c.Faults {
		if !k.Known() {
			return c, fmt.Errorf("%w: %w %q", ErrConfig, fault.ErrUnknown, k)
		}
	}
	return c, nil
}

// nodeKinds are the faults of c that package backend's plan injects.
func (c Config) nodeKinds() []fault.Kind {
	var ks []fault.Kind
	for _, k := range backend.Kinds() {
		if slices.Contains(c.Faults, k) {
			ks = append(ks, k)
		}
	}
	return ks
}

func (c Config) has(k fault.Kind) bool { return slices.Contains(c.Faults, k) }
