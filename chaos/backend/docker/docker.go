// Package docker is the container backend of the chaos harness: each node a
// Redis container (through testcontainers-go) on a private Docker network,
// behind an in-process fault proxy whose address clients keep across
// restarts. It implements backend.Backend, backend.Direct, backend.Proxied
// and, with WithReplicas (each node a primary and a replica container under
// a Sentinel container), backend.Replicated. Sweep removes what runs that
// died left behind.
package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
	"github.com/testcontainers/testcontainers-go/network"

	"github.com/fencedlock/fencedlock/chaos/backend"
	"github.com/fencedlock/fencedlock/chaos/internal/netfault"
	"github.com/fencedlock/fencedlock/chaos/internal/sentinel"
)

// Backend is the container backend.Backend: N Redis containers from one image, on a
// private Docker network of their own (node i answers to the alias "node<i>"
// there), each with a named volume at /data holding its append-only file
// (fsynced at every write), all created through testcontainers-go. Clients
// reach node i at a loopback proxy whose address stays the same for the
// Backend's life; behind it a relay dials the port Docker publishes for the
// container, which changes at every start and network reconnect.
//
// What each fault does to the container:
//   - Kill: docker kill (SIGKILL; a paused container is killed too). The
//     container and its volume stay; Start is docker start.
//   - Restart with data: kill and start. Without data: the container and its
//     volume are removed and a new, empty one is created with the same name,
//     alias and clock.
//   - Pause, Resume: docker pause, unpause (the cgroup freezer): connections
//     stay open and nothing is answered.
//   - Partition: the proxy drops every byte both ways, as in package process, and the
//     container is disconnected from its network (docker network
//     disconnect), so it is cut off there too. Docker drops the published
//     port with it; the relay keeps the clients' connections open and
//     silent meanwhile. Heal reconnects the container with its alias, waits
//     for PING on the new published port, and lets bytes through: clients
//     see timeouts during the partition, then their open connections close
//     and they dial again.
//   - SetLatency: the proxy, as in package process.
//   - SetClockSkew: a container's environment cannot change, so the
//     container is recreated on the same volume (its data kept) with
//     libfaketime preloaded, the same recipe as Process. The image must hold
//     /usr/lib/faketime/libfaketime.so.1 (scripts/redis-image.sh puts it
//     there; the public redis image has none: backend.ErrNoFaketime).
//
// With WithReplicas, a node is a pair of containers under a Sentinel
// container instead, each with a fixed address on the network, and the
// faults act as WithReplicas says: no container is created anew.
//
// A node operation, once begun, is carried through even if its ctx ends
// (within a bound of its own): Docker takes tens to hundreds of milliseconds
// per operation, and one cut short would leave a node changed with nobody
// to undo it.
//
// Close removes every container, volume and network the Backend created, so
// testcontainers' Ryuk reaper is not needed; Sweep removes those of a
// process that died before it could close its Backend. A Backend is safe for
// concurrent use; operations on one node are serialised.
type Backend struct {
	cfg      config
	provider *testcontainers.DockerProvider
	cli      client.APIClient
	net      *testcontainers.DockerNetwork
	host     string // where published ports are dialled
	loopback bool   // host is this machine: publish on 127.0.0.1 only
	run      string // LabelRun, also in names
	labels   map[string]string
	server   *toxiproxy.ApiServer
	faketime bool // the image has libfaketime at faketimePath
	nodes    []*dockerNode
	timing   sentinel.Timing
	sentinel *sentinelCtr // nil without replicas
	promos   sentinel.Promotions
	// With replicas, the network's subnet (see claimSubnet) and the last
	// fixed address handed out on it.
	subnet netip.Prefix
	lastIP netip.Addr

	mu     sync.Mutex // protects closed
	closed bool
}

var (
	_ backend.Backend    = (*Backend)(nil)
	_ backend.Direct     = (*Backend)(nil)
	_ backend.Proxied    = (*Backend)(nil)
	_ backend.Replicated = (*Backend)(nil)
	_ backend.Promotions = (*Backend)(nil)
)

// Images for Docker backends.
const (
	// LocalImage is what scripts/redis-image.sh builds from the machine's own
	// redis-server, with no registry.
	LocalImage = "fencedlock/redis:local"
	// PublicImage is the image used when LocalImage is not there.
	PublicImage = "redis:7.0"
)

// faketimePath is where the node image keeps libfaketime.
const faketimePath = "/usr/lib/faketime/libfaketime.so.1"

var (
	// ErrNoEngine: no Docker engine answered.
	ErrNoEngine = errors.New("docker: no Docker engine")
	// ErrNoImage: the node image is not in the engine and could not be pulled.
	ErrNoImage = errors.New("docker: Redis image not available (build one with scripts/redis-image.sh, or pull one)")
)

// Option configures New.
type Option func(*config)

type config struct {
	image        string
	args         []string
	startTimeout time.Duration
	logger       tclog.Logger
	replicaTTL   time.Duration // > 0: WithReplicas
}

// WithImage sets the Redis image. Any image whose entrypoint runs
// redis-server with the container's arguments works: LocalImage, or the
// public redis images. Default: LocalImage if the engine has it, otherwise
// PublicImage. A missing image is pulled once; if that fails, New
// returns ErrNoImage.
func WithImage(ref string) Option { return func(c *config) { c.image = ref } }

// WithArgs adds redis-server arguments, e.g. "--maxmemory", "64mb".
func WithArgs(args ...string) Option {
	return func(c *config) { c.args = append(c.args, args...) }
}

// WithStartTimeout bounds each wait for a container to answer PING
// after it starts. Default 30s.
func WithStartTimeout(d time.Duration) Option {
	return func(c *config) { c.startTimeout = d }
}

// WithLog sends testcontainers-go's progress messages to l (a
// *log.Logger, or a testing.T through testcontainers' log.TestLogger).
// Default: none.
func WithLog(l interface{ Printf(format string, v ...any) }) Option {
	return func(c *config) { c.logger = l }
}

// New creates the network, the volumes and n node containers, starts
// them and their proxies, and waits until each answers PING through its
// proxy. ctx bounds the start only. On error, whatever was created is
// removed again. The engine is found as testcontainers-go finds it
// (DOCKER_HOST, Docker contexts, ~/.testcontainers.properties); with
// TESTCONTAINERS_RYUK_DISABLED=true it starts no Ryuk container (whose image
// must otherwise be pullable).
func New(ctx context.Context, n int, opts ...Option) (*Backend, error) {
	if n < 1 {
		return nil, fmt.Errorf("docker: %d nodes: want at least 1", n)
	}
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.startTimeout <= 0 {
		cfg.startTimeout = 30 * time.Second
	}
	if cfg.logger == nil {
		cfg.logger = tclog.NewNoopLogger()
	}
	provider, err := testcontainers.NewDockerProvider(testcontainers.WithLogger(cfg.logger))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoEngine, err)
	}
	var id [4]byte
	_, _ = rand.Read(id[:])
	d := &Backend{
		cfg:      cfg,
		provider: provider,
		cli:      provider.Client(),
		run:      hex.EncodeToString(id[:]),
		server:   netfault.NewServer(),
		timing:   sentinel.TimingFor(cfg.replicaTTL),
	}
	d.labels = map[string]string{LabelChaos: "1", LabelRun: d.run, LabelOwner: owner()}
	if err := d.setup(ctx, n); err != nil {
		_ = d.Close()
		if !provider.Config().RyukDisabled && strings.Contains(err.Error(), "reaper") {
			err = fmt.Errorf("%w (testcontainers' Ryuk is on, and its image may not be pullable here: set TESTCONTAINERS_RYUK_DISABLED=true; this backend removes its own containers)", err)
		}
		return nil, err
	}
	return d, nil
}

func (d *Backend) setup(ctx context.Context, n int) error {
	if err := d.provider.Health(ctx); err != nil {
		return fmt.Errorf("%w: %w", ErrNoEngine, err)
	}
	if d.cfg.image == "" {
		d.cfg.image = PublicImage
		if _, err := d.cli.ImageInspect(ctx, LocalImage); err == nil {
			d.cfg.image = LocalImage
		}
	}
	if err := d.ensureImage(ctx); err != nil {
		return err
	}
	nw, err := network.New(ctx, network.WithLabels(d.labels))
	if err != nil {
		return fmt.Errorf("docker: docker network: %w", err)
	}
	d.net = nw
	if d.cfg.replicaTTL > 0 {
		d.net, err = d.claimSubnet(ctx, nw)
		if err != nil {
			return err
		}
	}
	if err := d.findHost(ctx); err != nil {
		return err
	}
	for i := range n {
		node, err := d.startNode(ctx, i)
		if node != nil {
			d.nodes = append(d.nodes, node) // so that Close removes it
		}
		if err != nil {
			return fmt.Errorf("docker: node %d: %w", i, err)
		}
		if i == 0 {
			ctr := node.ctr
			if node.pair != nil {
				ctr = node.pair.servers[0].ctr
			}
			_, err := d.cli.ContainerStatPath(ctx, ctr.GetContainerID(), client.ContainerStatPathOptions{Path: faketimePath})
			d.faketime = err == nil
		}
	}
	if d.cfg.replicaTTL > 0 {
		pairs := make([]*pair, len(d.nodes))
		for i, n := range d.nodes {
			pairs[i] = n.pair
		}
		s, err := d.startSentinel(ctx, pairs)
		d.sentinel = s // so that Close removes it
		return err
	}
	return nil
}

// Image is the image the nodes run.
func (d *Backend) Image() string { return d.cfg.image }

// Network is the name of the nodes' Docker network.
func (d *Backend) Network() string { return d.net.Name }

// Nodes implements Backend.
func (d *Backend) Nodes() []backend.Node {
	nodes := make([]backend.Node, len(d.nodes))
	for i, n := range d.nodes {
		nodes[i] = n
	}
	return nodes
}

// DirectAddr implements Direct: the port Docker publishes for the container
// now. It changes when the container starts again, and there is none while
// the node is down or partitioned.
func (d *Backend) DirectAddr(i int) (string, error) {
	n, err := d.node(i)
	if err != nil {
		return "", err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.pair != nil {
		if addr := n.pair.primaryPublished(); addr != "" {
			return addr, nil
		}
		return "", fmt.Errorf("docker: node %d's primary has no published port now: %w", i, backend.ErrNotRunning)
	}
	if !n.running || !n.connected {
		return "", fmt.Errorf("docker: node %d has no published port now: %w", i, backend.ErrNotRunning)
	}
	return n.published, nil
}

// ContainerID is the ID of node i's container now, for looking at it
// (docker logs, docker exec, docker inspect); of a pair, its current
// primary's. A restart without data or a clock change replaces a plain
// node's container (never a pair's). Do not stop, pause or remove it
// behind the Backend's back: it keeps track of the container's state.
func (d *Backend) ContainerID(i int) (string, error) {
	n, err := d.node(i)
	if err != nil {
		return "", err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.pair != nil {
		return n.pair.servers[n.pair.primaryIndex()].ctr.GetContainerID(), nil
	}
	if n.ctr == nil {
		return "", fmt.Errorf("docker: node %d has no container now", i)
	}
	return n.ctr.GetContainerID(), nil
}

func (d *Backend) node(i int) (*dockerNode, error) {
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if closed {
		return nil, backend.ErrClosed
	}
	if i < 0 || i >= len(d.nodes) {
		return nil, fmt.Errorf("docker: node %d of %d: %w", i, len(d.nodes), backend.ErrNoNode)
	}
	return d.nodes[i], nil
}

// name is the container and volume name of node i.
func (d *Backend) name(i int) string {
	return "fencedlock-chaos-" + d.run + "-node" + strconv.Itoa(i)
}

// Close implements Backend: proxies first, so clients see their connections
// close, then the containers, volumes and network. Whatever it cannot remove
// is reported and left to Sweep.
func (d *Backend) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	d.mu.Unlock()
	// The start context may be gone: cleaning up needs its own.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []error
	for _, n := range d.nodes {
		n.stopProxy()
	}
	if d.sentinel != nil {
		// Before the nodes, so that it fails none over as they go.
		if err := d.sentinel.close(ctx, d.cli); err != nil {
			errs = append(errs, fmt.Errorf("docker: close sentinel: %w", err))
		}
	}
	for _, n := range d.nodes {
		n.mu.Lock() // let an operation in progress finish
		if err := n.remove(ctx, true); err != nil {
			errs = append(errs, fmt.Errorf("docker: close node %d: %w", n.index, err))
		}
		n.mu.Unlock()
	}
	if d.net != nil {
		if err := d.net.Remove(ctx); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("docker: close: remove network: %w", err))
		}
	}
	// Anything of this run a failed step left behind (a container created
	// but not recorded, say).
	if _, err := sweep(ctx, d.cli, func(l map[string]string) bool { return l[LabelRun] == d.run }); err != nil {
		errs = append(errs, err)
	}
	if err := d.provider.Close(); err != nil {
		errs = append(errs, fmt.Errorf("docker: close docker client: %w", err))
	}
	return errors.Join(errs...)
}
