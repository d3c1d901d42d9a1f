// Package examplenodes gives the example programs their Redis nodes: the
// servers named by a --nodes flag, or n redis-server processes started on
// free loopback ports. It is the boilerplate the examples share, so that each
// example's main.go shows only the lock usage a user copies. In a service of
// your own, the equivalent is one redis.NewClient per node address.
package examplenodes

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/internal/redisproc"
)

// Nodes are the Redis nodes of one example run.
type Nodes struct {
	// Addrs are the nodes' host:port, in order.
	Addrs []string
	// Clients has one go-redis client per node, as redlock.New takes them.
	Clients []redis.UniversalClient
	// Procs are the redis-server processes Open started, in the order of
	// Addrs; nil when the addresses were given. Only these may be killed.
	Procs []*redisproc.Proc
}

// Flag defines the --nodes flag on fs. n is how many nodes the example
// starts when the flag is not given.
func Flag(fs *flag.FlagSet, n int) *string {
	start := fmt.Sprintf("%d local redis-server processes", n)
	if n == 1 {
		start = "a local redis-server process"
	}
	return fs.String("nodes", "", "comma-separated host:port of Redis nodes to use (default: start "+start+")")
}

// Open connects to the nodes listed in addrs (comma-separated host:port), or
// when addrs is empty starts n redis-server processes on free loopback ports
// and connects to those. Close releases everything Open made.
func Open(ctx context.Context, addrs string, n int) (*Nodes, error) {
	if strings.TrimSpace(addrs) != "" {
		list, err := ParseAddrs(addrs)
		if err != nil {
			return nil, err
		}
		ns := connect(list, nil)
		ns.warmUp(ctx) // errors are left to the lock to report: a minority may be down
		return ns, nil
	}
	if n <= 0 {
		return nil, fmt.Errorf("examplenodes: %d nodes to start", n)
	}
	procs, err := redisproc.StartN(ctx, n, redisproc.Config{})
	if err != nil {
		return nil, err
	}
	list := make([]string, len(procs))
	for i, p := range procs {
		list[i] = p.Addr()
	}
	ns := connect(list, procs)
	if err := ns.warmUp(ctx); err != nil {
		_ = ns.Close()
		return nil, err
	}
	return ns, nil
}

// warmUp opens a connection to each node, as a running service would have,
// so that the examples' first lock calls do not pay for the dial and the
// handshake within their short per-node timeouts.
func (ns *Nodes) warmUp(ctx context.Context) error {
	var errs []error
	for i, c := range ns.Clients {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		if err := c.Ping(ctx).Err(); err != nil {
			errs = append(errs, fmt.Errorf("examplenodes: node %s: %w", ns.Addrs[i], err))
		}
		cancel()
	}
	return errors.Join(errs...)
}

func connect(addrs []string, procs []*redisproc.Proc) *Nodes {
	ns := &Nodes{Addrs: addrs, Procs: procs, Clients: make([]redis.UniversalClient, len(addrs))}
	for i, a := range addrs {
		// ContextTimeoutEnabled lets the lock's per-node deadlines free connections.
		ns.Clients[i] = redis.NewClient(&redis.Options{Addr: a, ContextTimeoutEnabled: true})
	}
	return ns
}

// ParseAddrs splits a --nodes value into host:port addresses.
func ParseAddrs(s string) ([]string, error) {
	var list []string
	for a := range strings.SplitSeq(s, ",") {
		a = strings.TrimSpace(a)
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			return nil, fmt.Errorf("examplenodes: --nodes: %q is not host:port", a)
		}
		list = append(list, a)
	}
	return list, nil
}

// Local reports whether Open started the nodes (so the example may kill them).
func (ns *Nodes) Local() bool { return len(ns.Procs) > 0 }

// String describes the nodes for the example's first line of output.
func (ns *Nodes) String() string {
	where := "given"
	if ns.Local() {
		where = "local redis-server"
	}
	return fmt.Sprintf("%d %s nodes (%s)", len(ns.Addrs), where, strings.Join(ns.Addrs, ", "))
}

// Close closes the clients and stops the processes Open started.
func (ns *Nodes) Close() error {
	var errs []error
	for _, c := range ns.Clients {
		errs = append(errs, c.Close())
	}
	for _, p := range ns.Procs {
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}

// FromArgs parses an example's command line (its only flag is --nodes, see
// Flag) and opens its nodes (see Open). A parse error, flag.ErrHelp for -h
// included, comes back as it is.
func FromArgs(ctx context.Context, name string, args []string, n int) (*Nodes, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	addrs := Flag(fs, n)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	return Open(ctx, *addrs, n)
}

// Main runs an example's run function with a ctx that Ctrl-C cancels, and
// exits 1 when it fails (but not after -h printed the usage).
func Main(name string, run func(ctx context.Context, args []string, stdout io.Writer) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}
