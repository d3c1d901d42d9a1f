// Package process is the embedded backend of the chaos harness: the nodes
// are local redis-server processes, each behind an in-process fault proxy
// whose address clients keep across restarts. It implements
// backend.Backend, backend.Direct and backend.Proxied.
package process

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"

	"github.com/fencedlock/fencedlock/chaos/backend"
	"github.com/fencedlock/fencedlock/chaos/internal/faketime"
	"github.com/fencedlock/fencedlock/chaos/internal/netfault"
	"github.com/fencedlock/fencedlock/chaos/internal/sentinel"
	"github.com/fencedlock/fencedlock/internal/redisproc"
)

// Backend is the embedded backend.Backend: N redis-server processes on ephemeral
// loopback ports, with the append-only file on and fsynced at every write
// (so a restart with data loses nothing acknowledged), each behind an
// in-process TCP proxy whose address clients keep across restarts.
//
// Kill, Start, Restart, Pause and Resume act on the process; Partition and
// SetLatency act on the proxy. A partition drops every byte in both
// directions, on open and new connections alike (the proxy still accepts
// TCP connections, but nothing is answered), so clients see timeouts, as
// behind a firewall that drops packets; bytes sent during a partition are
// lost, not delivered late (latency is the fault that delivers late). Heal
// lets bytes through again on the same connections. While a node is down,
// its proxy accepts connections and closes them at once, which clients see
// as a reset. SetClockSkew restarts the node under libfaketime.
//
// Started WithReplicas, each node is a primary with a replica under one
// Sentinel, and the process operations act on the node's current primary:
// see WithReplicas.
type Backend struct {
	nodes    []*procNode
	server   *toxiproxy.ApiServer
	faketime string        // path of libfaketime.so.1, "" if missing
	sentinel *sentinelProc // nil without replicas
	timing   sentinel.Timing
	promos   sentinel.Promotions

	mu     sync.Mutex // protects closed
	closed bool
}

type procNode struct {
	index int
	addr  string          // the proxy's
	proc  *redisproc.Proc // nil for a pair
	pair  *pair           // nil without replicas
	proxy *toxiproxy.Proxy
	net   *netfault.State

	mu   sync.Mutex // serialises process operations on this node; protects skew
	skew string     // FAKETIME spec the node runs under, "" for the real clock
}

func (n *procNode) Index() int   { return n.index }
func (n *procNode) Addr() string { return n.addr }

// primary is the process clients reach: the node's own, or its pair's
// current primary.
func (n *procNode) primary() *redisproc.Proc {
	if n.pair == nil {
		return n.proc
	}
	return n.pair.procs[n.pair.primaryIndex()]
}

// procs is every process of the node.
func (n *procNode) procs() []*redisproc.Proc {
	if n.pair == nil {
		return []*redisproc.Proc{n.proc}
	}
	return n.pair.procs[:]
}

var (
	_ backend.Backend    = (*Backend)(nil)
	_ backend.Direct     = (*Backend)(nil)
	_ backend.Proxied    = (*Backend)(nil)
	_ backend.Replicated = (*Backend)(nil)
	_ backend.Promotions = (*Backend)(nil)
)

// Option configures New.
type Option func(*config)

type config struct {
	binary       string
	args         []string
	startTimeout time.Duration
	faketime     string
	replicaTTL   time.Duration // > 0: WithReplicas
}

// WithBinary sets the redis-server executable. Default: "redis-server" from PATH.
func WithBinary(path string) Option { return func(c *config) { c.binary = path } }

// WithArgs adds redis-server arguments, e.g. "--maxmemory", "64mb".
func WithArgs(args ...string) Option {
	return func(c *config) { c.args = append(c.args, args...) }
}

// WithStartTimeout bounds each wait for a node to answer PING after it
// starts. Default 10s.
func WithStartTimeout(d time.Duration) Option {
	return func(c *config) { c.startTimeout = d }
}

// WithFaketime sets the path of libfaketime.so.1. Default: found in the
// usual library directories; if it is not there, SetClockSkew returns
// backend.ErrNoFaketime.
func WithFaketime(path string) Option { return func(c *config) { c.faketime = path } }

// New starts n nodes and their proxies and waits until each answers
// PING through its proxy. ctx bounds the start only. On error, whatever was
// started is stopped again.
func New(ctx context.Context, n int, opts ...Option) (*Backend, error) {
	if n < 1 {
		return nil, fmt.Errorf("process: %d nodes: want at least 1", n)
	}
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.startTimeout <= 0 {
		cfg.startTimeout = 10 * time.Second
	}
	if cfg.faketime == "" {
		cfg.faketime = faketime.Find()
	}
	b := &Backend{server: netfault.NewServer(), faketime: cfg.faketime, timing: sentinel.TimingFor(cfg.replicaTTL)}
	var pairs []*pair
	for i := range n {
		node, err := b.startNode(ctx, i, cfg)
		if err != nil {
			_ = b.Close()
			return nil, err
		}
		b.nodes = append(b.nodes, node)
		if node.pair != nil {
			pairs = append(pairs, node.pair)
		}
	}
	if cfg.replicaTTL > 0 {
		s, err := startSentinel(ctx, pairs, b.timing, cfg.startTimeout)
		if err != nil {
			_ = b.Close()
			return nil, err
		}
		b.sentinel = s
		s.watch(pairs)
	}
	return b, nil
}

func (b *Backend) startNode(ctx context.Context, i int, cfg config) (*procNode, error) {
	name := "node" + strconv.Itoa(i)
	node := &procNode{index: i}
	var upstream string
	if cfg.replicaTTL > 0 {
		p, err := startPair(ctx, name, cfg)
		if err != nil {
			return nil, fmt.Errorf("process: node %d: %w", i, err)
		}
		p.node, p.promotions = i, &b.promos
		node.pair, upstream = p, p.relay.Addr()
	} else {
		proc, err := redisproc.Start(ctx, redisproc.Config{
			Binary:       cfg.binary,
			AOF:          true,
			Args:         cfg.args,
			StartTimeout: cfg.startTimeout,
		})
		if err != nil {
			return nil, fmt.Errorf("process: node %d: %w", i, err)
		}
		node.proc, upstream = proc, proc.Addr()
	}
	node.net = netfault.NewState()
	proxy, err := netfault.StartProxy(b.server, name, upstream, node.net)
	if err != nil {
		_ = node.closeProcs()
		return nil, fmt.Errorf("process: node %d: %w", i, err)
	}
	node.proxy, node.addr = proxy, proxy.Listen
	if err := redisproc.WaitPing(ctx, node.addr, cfg.startTimeout, nil); err != nil {
		netfault.StopProxy(proxy, node.net)
		_ = node.closeProcs()
		return nil, fmt.Errorf("process: node %d through its proxy: %w", i, err)
	}
	return node, nil
}

// closeProcs stops the node's processes (and a pair's proxies and relay).
func (n *procNode) closeProcs() error {
	if n.pair != nil {
		return n.pair.close()
	}
	return n.proc.Close()
}

// Nodes implements backend.Backend.
func (b *Backend) Nodes() []backend.Node {
	nodes := make([]backend.Node, len(b.nodes))
	for i, n := range b.nodes {
		nodes[i] = n
	}
	return nodes
}

// DirectAddr implements backend.Direct: the redis-server's own address.
func (b *Backend) DirectAddr(i int) (string, error) {
	n, err := b.node(i)
	if err != nil {
		return "", err
	}
	return n.primary().Addr(), nil
}

func (b *Backend) node(i int) (*procNode, error) {
	b.mu.Lock()
	closed := b.closed
	b.mu.Unlock()
	if closed {
		return nil, backend.ErrClosed
	}
	if i < 0 || i >= len(b.nodes) {
		return nil, fmt.Errorf("process: node %d of %d: %w", i, len(b.nodes), backend.ErrNoNode)
	}
	return b.nodes[i], nil
}

// withProc runs f on node i's process, serialised with the node's other
// process operations, and wraps its error.
func (b *Backend) withProc(i int, op string, f func(n *procNode) error) error {
	n, err := b.node(i)
	if err != nil {
		return fmt.Errorf("process: %s: %w", op, err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := f(n); err != nil {
		if errors.Is(err, redisproc.ErrNotRunning) {
			err = backend.ErrNotRunning
		}
		return fmt.Errorf("process: %s node %d: %w", op, i, err)
	}
	return nil
}

// Kill implements backend.Backend.
func (b *Backend) Kill(_ context.Context, i int) error {
	return b.withProc(i, "kill", func(n *procNode) error { return n.primary().Kill() })
}

// Start implements backend.Backend.
func (b *Backend) Start(ctx context.Context, i int) error {
	return b.withProc(i, "start", func(n *procNode) error {
		for _, p := range n.procs() {
			if !p.Running() {
				if err := p.StartStopped(ctx); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// Restart implements backend.Backend.
func (b *Backend) Restart(ctx context.Context, i int, withData bool) error {
	return b.withProc(i, "restart", func(n *procNode) error { return n.primary().Restart(ctx, withData) })
}

// Pause implements backend.Backend.
func (b *Backend) Pause(_ context.Context, i int) error {
	return b.withProc(i, "pause", func(n *procNode) error { return n.primary().Pause() })
}

// Resume implements backend.Backend.
func (b *Backend) Resume(_ context.Context, i int) error {
	return b.withProc(i, "resume", func(n *procNode) error {
		resumed := false
		for _, p := range n.procs() {
			if p.Paused() {
				if err := p.Resume(); err != nil {
					return err
				}
				resumed = true
			}
		}
		if resumed {
			return nil
		}
		return n.primary().Resume() // ErrNotRunning on a stopped node
	})
}

// Partition implements backend.Backend: the proxy drops all bytes both ways.
func (b *Backend) Partition(_ context.Context, i int) error {
	n, err := b.node(i)
	if err != nil {
		return fmt.Errorf("process: partition: %w", err)
	}
	n.net.SetPartitioned(true)
	return nil
}

// Heal implements backend.Backend.
func (b *Backend) Heal(_ context.Context, i int) error {
	n, err := b.node(i)
	if err != nil {
		return fmt.Errorf("process: heal: %w", err)
	}
	n.net.SetPartitioned(false)
	return nil
}

// DropReplies implements backend.Proxied: the proxy passes requests and
// drops every byte the node sends back.
func (b *Backend) DropReplies(_ context.Context, i int, drop bool) error {
	n, err := b.node(i)
	if err != nil {
		return fmt.Errorf("process: drop replies: %w", err)
	}
	n.net.SetDropReplies(drop)
	return nil
}

// Blackhole implements backend.Proxied: the proxy drops every byte both
// ways, and nothing else changes.
func (b *Backend) Blackhole(_ context.Context, i int, on bool) error {
	n, err := b.node(i)
	if err != nil {
		return fmt.Errorf("process: blackhole: %w", err)
	}
	n.net.SetPartitioned(on)
	return nil
}

// SetLatency implements backend.Backend: the proxy holds each request for d/2 and
// each reply for the other half.
func (b *Backend) SetLatency(_ context.Context, i int, d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("process: latency %v: want >= 0", d)
	}
	n, err := b.node(i)
	if err != nil {
		return fmt.Errorf("process: latency: %w", err)
	}
	n.net.SetLatency(d)
	return nil
}

// SetClockSkew implements backend.Backend: the node restarts, keeping its data, with
// libfaketime preloaded. (Of a pair, the primary restarts under it now,
// the replica at its next start.) Keys expire by the fake clock: "+0 x2" halves every
// TTL in real time; a jump ahead expires at once, at load, every key whose
// expiry time the jump passes.
func (b *Backend) SetClockSkew(ctx context.Context, i int, spec string) error {
	if spec != "" {
		if err := faketime.CheckSpec(spec); err != nil {
			return fmt.Errorf("process: %w", err)
		}
		if _, err := os.Stat(b.faketime); b.faketime == "" || err != nil {
			// A missing preload library is only a warning to the loader: the
			// node would start on the real clock, silently.
			return fmt.Errorf("process: clock skew %q on node %d: %w", spec, i, backend.ErrNoFaketime)
		}
	}
	return b.withProc(i, "clock skew", func(n *procNode) error {
		for _, p := range n.procs() {
			p.SetEnv(b.skewEnv(spec))
		}
		if err := n.primary().Restart(ctx, true); err != nil {
			// Leave the node stopped, but let a later Start run it on the
			// clock it had before.
			for _, p := range n.procs() {
				p.SetEnv(b.skewEnv(n.skew))
			}
			return err
		}
		n.skew = spec
		return nil
	})
}

// skewEnv is the environment of a node running under spec.
func (b *Backend) skewEnv(spec string) []string {
	if spec == "" {
		return nil
	}
	return faketime.Env(b.faketime, spec)
}

// Close implements backend.Backend: proxies first, so clients see their connections
// close, then the processes.
func (b *Backend) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.mu.Unlock()
	var errs []error
	for _, n := range b.nodes {
		netfault.StopProxy(n.proxy, n.net)
	}
	if b.sentinel != nil {
		// Before the nodes, so that it fails none over as they stop.
		if err := b.sentinel.close(); err != nil {
			errs = append(errs, fmt.Errorf("process: close sentinel: %w", err))
		}
	}
	for _, n := range b.nodes {
		n.mu.Lock() // let an operation in progress finish
		if err := n.closeProcs(); err != nil {
			errs = append(errs, fmt.Errorf("process: close node %d: %w", n.index, err))
		}
		n.mu.Unlock()
	}
	return errors.Join(errs...)
}
