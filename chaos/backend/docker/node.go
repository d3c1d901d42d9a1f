package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	mobynet "github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/fencedlock/fencedlock/chaos/internal/faketime"
	"github.com/fencedlock/fencedlock/chaos/internal/netfault"
	"github.com/fencedlock/fencedlock/chaos/internal/relay"
	"github.com/fencedlock/fencedlock/internal/redisproc"
)

// redisPort is the port Redis listens on inside a node container.
const redisPort = 6379

// dockerNode is one container node: its stable proxy, the relay behind it,
// and the container of the moment (a restart without data or a clock change
// replaces it).
type dockerNode struct {
	d     *Backend
	index int
	name  string // of the container and of its volume
	alias string // on the Backend's network
	addr  string // the proxy's
	proxy *toxiproxy.Proxy
	relay *relay.Relay
	net   *netfault.State
	pair  *pair // nil without replicas; set at the start, then only read

	mu          sync.Mutex               // serialises container operations on this node; protects the fields below
	ctr         testcontainers.Container // nil after remove, until the next create
	published   string                   // where Docker publishes the container's port, while running and connected
	running     bool
	paused      bool
	partitioned bool   // between Partition and Heal
	connected   bool   // the container is attached to the network
	skew        string // FAKETIME spec the container runs under, "" for the real clock
}

func (n *dockerNode) Index() int   { return n.index }
func (n *dockerNode) Addr() string { return n.addr }

// startNode creates node i's volume, proxy, relay and container, and waits
// until it answers PING through the proxy. On error it returns the node so
// far, for Close to remove.
func (d *Backend) startNode(ctx context.Context, i int) (*dockerNode, error) {
	n := &dockerNode{d: d, index: i, name: d.name(i), alias: "node" + strconv.Itoa(i), net: netfault.NewState()}
	r, err := relay.New(n.net)
	if err != nil {
		return nil, err
	}
	n.relay = r
	p, err := netfault.StartProxy(d.server, n.name, r.Addr(), n.net)
	if err != nil {
		r.Close()
		return nil, err
	}
	n.proxy, n.addr = p, p.Listen
	n.mu.Lock()
	defer n.mu.Unlock()
	if d.cfg.replicaTTL > 0 {
		n.pair, err = d.startPair(ctx, i, r)
	} else {
		err = n.recreate(ctx, true)
	}
	if err != nil {
		return n, err
	}
	if err := redisproc.WaitPing(ctx, n.addr, d.cfg.startTimeout, nil); err != nil {
		return n, fmt.Errorf("through its proxy: %w", err)
	}
	return n, nil
}

func (n *dockerNode) stopProxy() {
	netfault.StopProxy(n.proxy, n.net)
	n.relay.Close()
}

// recreate replaces the container (and, without keepData, empties its
// volume) and starts the new one. n.mu must be held.
func (n *dockerNode) recreate(ctx context.Context, keepData bool) error {
	if err := n.remove(ctx, !keepData); err != nil {
		return err
	}
	if _, err := n.d.cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: n.name, Labels: n.d.labels}); err != nil {
		return fmt.Errorf("create volume: %w", err)
	}
	d := n.d
	env := make(map[string]string)
	if n.skew != "" {
		for _, kv := range faketime.Env(faketimePath, n.skew) {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
	}
	req := d.request(n.name, append(serverArgs("/data"), d.cfg.args...))
	req.Env = env
	req.NetworkAliases = map[string][]string{d.net.Name: {n.alias}}
	req.Mounts = testcontainers.ContainerMounts{testcontainers.VolumeMount(n.name, "/data")}
	ctr, err := d.provider.CreateContainer(ctx, req)
	if ctr != nil {
		n.ctr = ctr // removed with the rest even if creating it failed half-way
	}
	if err != nil {
		return fmt.Errorf("create container from %s: %w", d.cfg.image, err)
	}
	n.connected = true
	return n.start(ctx)
}

// serverArgs are the redis-server arguments of every node server: the
// append-only file fsynced at every write, in dir.
func serverArgs(dir string) []string {
	return []string{
		"--port", strconv.Itoa(redisPort),
		"--protected-mode", "no", // Debian's build keeps it on; the nodes are reached from outside the container
		"--dir", dir,
		"--save", "",
		"--appendonly", "yes", "--appendfsync", "always",
	}
}

// request is what creates a container named name from the image, on the
// network, that runs the image's redis-server with args on redisPort,
// published (on loopback when the engine is this machine), and is ready
// once it answers PING there.
func (d *Backend) request(name string, args []string) testcontainers.ContainerRequest {
	return testcontainers.ContainerRequest{
		Image:        d.cfg.image,
		Name:         name,
		Cmd:          args,
		Labels:       d.labels,
		ExposedPorts: []string{strconv.Itoa(redisPort) + "/tcp"},
		Networks:     []string{d.net.Name},
		WaitingFor:   pingReady{host: d.host, timeout: d.cfg.startTimeout},
		HostConfigModifier: func(hc *container.HostConfig) {
			if d.loopback {
				port, _ := mobynet.PortFrom(redisPort, mobynet.TCP)
				hc.PortBindings = mobynet.PortMap{port: {{HostIP: netip.AddrFrom4([4]byte{127, 0, 0, 1})}}}
			}
		},
	}
}

// start starts the stopped container and waits until it answers on its
// published port; a partitioned node is then cut off again (it is started
// on its network, where its readiness can be seen). n.mu must be held.
func (n *dockerNode) start(ctx context.Context) error {
	if n.ctr == nil {
		return n.recreate(ctx, true)
	}
	if err := n.join(ctx); err != nil {
		return err
	}
	if err := n.ctr.Start(ctx); err != nil {
		_ = n.kill(context.WithoutCancel(ctx))
		return fmt.Errorf("start container: %w", err)
	}
	addr, err := readyAddr(ctx, n.ctr, n.d.host, n.d.cfg.startTimeout)
	if err != nil {
		_ = n.kill(context.WithoutCancel(ctx))
		return err
	}
	n.running, n.paused, n.published = true, false, addr
	n.relay.SetUpstream(addr)
	if n.partitioned {
		return n.cut(ctx)
	}
	return nil
}

// kill stops the container with SIGKILL. n.mu must be held.
func (n *dockerNode) kill(ctx context.Context) error {
	// First, so that no new connection goes to a port Docker may hand to
	// another container.
	n.relay.SetUpstream("")
	n.published = ""
	if n.ctr == nil {
		return nil
	}
	_, err := n.d.cli.ContainerKill(ctx, n.ctr.GetContainerID(), client.ContainerKillOptions{Signal: "KILL"})
	if err != nil {
		// Not running (it died by itself, say) is what kill wants.
		st, serr := n.ctr.State(ctx)
		if serr != nil || st.Running {
			return fmt.Errorf("kill container: %w", err)
		}
	}
	n.running, n.paused = false, false
	return nil
}

// remove removes the container, and its volume too if volume is set.
// n.mu must be held.
func (n *dockerNode) remove(ctx context.Context, volume bool) error {
	n.relay.SetUpstream("")
	n.published = ""
	if n.pair != nil {
		return n.pair.remove(ctx, n.d.cli)
	}
	if n.ctr != nil {
		_, err := n.d.cli.ContainerRemove(ctx, n.ctr.GetContainerID(), client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		if err != nil && !errdefs.IsNotFound(err) {
			return fmt.Errorf("remove container: %w", err)
		}
		n.ctr = nil
	}
	n.running, n.paused, n.connected = false, false, false
	if volume {
		_, err := n.d.cli.VolumeRemove(ctx, n.name, client.VolumeRemoveOptions{Force: true})
		if err != nil && !errdefs.IsNotFound(err) {
			return fmt.Errorf("remove volume: %w", err)
		}
	}
	return nil
}

// cut disconnects the container from the network. n.mu must be held.
func (n *dockerNode) cut(ctx context.Context) error {
	n.relay.SetUpstream("")
	n.published = ""
	if !n.connected || n.ctr == nil {
		return nil
	}
	_, err := n.d.cli.NetworkDisconnect(ctx, n.d.net.ID, client.NetworkDisconnectOptions{Container: n.ctr.GetContainerID(), Force: true})
	if err != nil {
		return fmt.Errorf("disconnect from network: %w", err)
	}
	n.connected = false
	return nil
}

// join connects the container to the network with its alias and, if it
// runs, waits for its new published port to answer. n.mu must be held.
func (n *dockerNode) join(ctx context.Context) error {
	if n.ctr == nil {
		return nil
	}
	if !n.connected {
		_, err := n.d.cli.NetworkConnect(ctx, n.d.net.ID, client.NetworkConnectOptions{
			Container:      n.ctr.GetContainerID(),
			EndpointConfig: &mobynet.EndpointSettings{Aliases: []string{n.alias}},
		})
		if err != nil {
			return fmt.Errorf("connect to network: %w", err)
		}
		n.connected = true
	}
	if !n.running || n.published != "" {
		return nil
	}
	addr, err := readyAddr(ctx, n.ctr, n.d.host, n.d.cfg.startTimeout)
	if err != nil {
		return err
	}
	n.published = addr
	n.relay.SetUpstream(addr)
	return nil
}

// pingReady is the node containers' wait strategy: PING through the
// published port, from this process. It needs nothing inside the image (no
// shell, no redis-cli at a known path), so it works with LocalImage and the
// public images alike.
type pingReady struct {
	host    string
	timeout time.Duration
}

// WaitUntilReady implements wait.Strategy.
func (w pingReady) WaitUntilReady(ctx context.Context, t wait.StrategyTarget) error {
	_, err := readyAddr(ctx, t, w.host, w.timeout)
	return err
}

func (w pingReady) String() string { return "PING on the published port" }

// readyAddr polls until the container answers PING on its published port,
// and returns that address. A container that exits fails it at once, with
// the end of its log.
func readyAddr(ctx context.Context, t wait.StrategyTarget, host string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		addr, err := publishedAddr(ctx, t, host)
		if errors.Is(err, errExited) {
			return "", fmt.Errorf("%w: %s", err, logTail(ctx, t))
		}
		if err == nil {
			if err = redisproc.Ping(ctx, addr, 200*time.Millisecond); err == nil {
				return addr, nil
			}
		}
		last = err
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("container not answering PING: %w (last error: %v)", ctx.Err(), last)
		case <-tick.C:
		}
	}
}

var errExited = errors.New("container exited")

// publishedAddr is host:port where Docker publishes the container's Redis
// port now.
func publishedAddr(ctx context.Context, t wait.StrategyTarget, host string) (string, error) {
	ins, err := t.Inspect(ctx)
	if err != nil {
		return "", err
	}
	if st := ins.State; st != nil && !st.Running && st.Status != container.StateCreated {
		return "", fmt.Errorf("%w with code %d", errExited, st.ExitCode)
	}
	if ins.NetworkSettings != nil {
		for p, bs := range ins.NetworkSettings.Ports {
			if p.Num() != redisPort || p.Proto() != mobynet.TCP {
				continue
			}
			for _, b := range bs {
				if b.HostPort != "" && b.HostPort != "0" {
					return net.JoinHostPort(host, b.HostPort), nil
				}
			}
		}
	}
	return "", errors.New("no published port yet")
}

// logTail is the end of the container's log, for errors.
func logTail(ctx context.Context, t wait.StrategyTarget) string {
	rc, err := t.Logs(context.WithoutCancel(ctx))
	if err != nil {
		return "(no log)"
	}
	defer rc.Close()
	b, _ := io.ReadAll(io.LimitReader(rc, 1<<20))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	return strings.Join(lines, " | ")
}
