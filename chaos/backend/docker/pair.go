package docker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"

	"github.com/fencedlock/fencedlock/chaos/internal/relay"
	"github.com/fencedlock/fencedlock/chaos/internal/sentinel"
)

// ACL users of a pair's servers, each with every right and no password:
// the replica's link to its primary, and Sentinel's links. FailOver
// switches both off on the primary to hold back what it sends them, while
// its clients (the default user) go on.
const (
	replUser     = "repl"
	sentinelUser = "sentinel"
)

// pair is one node of a backend started WithReplicas: two containers, a
// primary and its replica, that know each other, and are known to
// Sentinel, by their addresses on the Backend's network. The node's relay
// leads to the port Docker publishes for the primary Sentinel last named.
type pair struct {
	name    string // Sentinel's name for it
	node    int    // the backend's index of it
	servers [2]*server
	// promotions hears of every move of the primary (read-only).
	promotions *sentinel.Promotions

	mu      sync.Mutex    // protects primary, changed and the servers' published
	primary int           // index in servers of the primary Sentinel last named
	changed chan struct{} // closed and replaced when primary changes
	relay   *relay.Relay
}

// server is one container of a pair (or Sentinel's). Its fields change
// only under the node's mu; published, of a pair's server, under the
// pair's mu too (the watch reads it).
type server struct {
	ctr       testcontainers.Container
	ip        string // on the Backend's network
	published string // host:port Docker publishes its Redis port on; "" while stopped
	running   bool
	paused    bool
	gen       int // generation of its data directory (see wipe)
}

// addr is the server's address on the network, as its peer and Sentinel
// reach it.
func (s *server) addr() string { return net.JoinHostPort(s.ip, strconv.Itoa(redisPort)) }

// startPair starts node i's two servers, makes the second a replica of
// the first, and points the relay at the first. On error it returns the
// pair so far, for Close to remove.
//
// The second server is made a replica by REPLICAOF once it runs, not by
// an argument: an argument would make it a replica of the first again at
// each start of its container, whichever Sentinel names now. Each server
// starts as a primary, as a process node's does, and Sentinel makes a
// server it does not name a replica.
func (d *Backend) startPair(ctx context.Context, i int, r *relay.Relay) (*pair, error) {
	p := &pair{name: "node" + strconv.Itoa(i), node: i, promotions: &d.promos, changed: make(chan struct{}), relay: r}
	for s := range p.servers {
		srv, err := d.startServer(ctx, d.name(i)+"-"+strconv.Itoa(s))
		if srv != nil {
			p.servers[s] = srv
		}
		if err != nil {
			return p, err
		}
	}
	if err := sentinel.Command(ctx, p.servers[1].published, d.cfg.startTimeout, "REPLICAOF", p.servers[0].ip, strconv.Itoa(redisPort)); err != nil {
		return p, fmt.Errorf("replica: %w", err)
	}
	r.Retarget(p.servers[0].published)
	return p, nil
}

// startServer creates and starts one container of a pair, with its data
// directory's first generation and the real clock (see wipe, setClock).
// Every server may become a replica: each knows the user to replicate as.
func (d *Backend) startServer(ctx context.Context, name string) (*server, error) {
	args := append(serverArgs(pairDataDir),
		"--user", replUser, "on", "nopass", "+@all", "~*", "&*",
		"--user", sentinelUser, "on", "nopass", "+@all", "~*", "&*",
		"--masteruser", replUser, "--masterauth", sentinel.AnyPassword,
		// A primary starts a full synchronisation at once (Redis waits 5s
		// by default for more replicas to share it: a pair has one).
		"--repl-diskless-sync-delay", "0")
	req := d.request(name, append(args, d.cfg.args...))
	req.Env = pairEnv()
	var err error
	if req.EndpointSettingsModifier, err = d.fixedIP(); err != nil {
		return nil, err
	}
	srv := &server{}
	return d.startContainer(ctx, req, srv, func(ctx context.Context) error { return d.newGeneration(ctx, srv) })
}

// startContainer creates a container from req as srv, runs prepare (if
// any) on it before it starts, starts it, and finds its address on the
// network and its published port. On error it returns srv if the
// container was created, for Close to remove.
func (d *Backend) startContainer(ctx context.Context, req testcontainers.ContainerRequest, srv *server, prepare func(context.Context) error) (*server, error) {
	ctr, err := d.provider.CreateContainer(ctx, req)
	if ctr == nil {
		return nil, fmt.Errorf("create container from %s: %w", d.cfg.image, err)
	}
	srv.ctr = ctr
	if err != nil {
		return srv, fmt.Errorf("create container from %s: %w", d.cfg.image, err)
	}
	if prepare != nil {
		if err := prepare(ctx); err != nil {
			return srv, err
		}
	}
	if err := ctr.Start(ctx); err != nil {
		return srv, fmt.Errorf("start container: %w", err)
	}
	if srv.published, err = readyAddr(ctx, ctr, d.host, d.cfg.startTimeout); err != nil {
		return srv, err
	}
	srv.running = true
	srv.ip, err = d.networkIP(ctx, ctr)
	return srv, err
}

// networkIP is the container's address on the Backend's network.
func (d *Backend) networkIP(ctx context.Context, ctr testcontainers.Container) (string, error) {
	ins, err := ctr.Inspect(ctx)
	if err != nil {
		return "", err
	}
	if ep := ins.NetworkSettings.Networks[d.net.Name]; ep != nil && ep.IPAddress.IsValid() {
		return ep.IPAddress.String(), nil
	}
	return "", fmt.Errorf("container %s has no address on %s", ctr.GetContainerID(), d.net.Name)
}

// remove removes the server's container.
func (s *server) remove(ctx context.Context, cli client.APIClient) error {
	_, err := cli.ContainerRemove(ctx, s.ctr.GetContainerID(), client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("remove container: %w", err)
	}
	return nil
}

// publishedAddr is where Docker publishes server s now, "" while it is
// stopped.
func (p *pair) publishedAddr(s int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.servers[s].published
}

// primaryPublished is where Docker publishes the primary now.
func (p *pair) primaryPublished() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.servers[p.primary].published
}

// setPublished records where server s is published now ("" while it is
// stopped), and moves the relay there if s is the primary.
func (p *pair) setPublished(s int, addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.servers[s].published = addr
	if s == p.primary {
		p.relay.Retarget(addr)
	}
}

// primaryIndex is the index of the primary Sentinel last named.
func (p *pair) primaryIndex() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.primary
}

// follow makes the server at addr (on the network) the primary and moves
// the relay to its published port. An address of neither is ignored.
func (p *pair) follow(addr string) {
	var changed chan struct{} // the one the move closes, once it is reported
	var report func()
	p.mu.Lock()
	for s, srv := range p.servers {
		if srv.addr() != addr || s == p.primary {
			continue
		}
		p.primary = s
		p.relay.Retarget(srv.published)
		changed = p.changed
		p.changed = make(chan struct{})
		if p.promotions != nil {
			// Decided under p.mu, which a failover waiting for this move
			// reads it under: it is still asking.
			report = p.promotions.Moved(p.node)
		}
	}
	p.mu.Unlock()
	if report != nil {
		report()
	}
	if changed != nil {
		close(changed)
	}
}

func (p *pair) changedCh() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.changed
}

// whole checks once that the pair is whole: the primary Sentinel names
// has the other server attached as a replica that is in sync and that
// Sentinel sees up. Each call is bounded by t.DownAfter: a server that
// does not answer within it is down to Sentinel too.
func (p *pair) whole(ctx context.Context, s *sentinel.Client, t sentinel.Timing) error {
	ctx, cancel := context.WithTimeout(ctx, t.DownAfter)
	defer cancel()
	addr, err := s.Primary(ctx, p.name, t.DownAfter)
	if err != nil {
		return err
	}
	p.follow(addr)
	primIdx := p.primaryIndex()
	prim, rep := p.servers[primIdx], p.servers[1-primIdx]
	pi, err := sentinel.ReplicationInfo(ctx, p.publishedAddr(primIdx))
	if err != nil {
		return err
	}
	if pi["role"] != "master" || sentinel.ReplicaState(pi, rep.ip, strconv.Itoa(redisPort)) != "online" {
		return fmt.Errorf("primary %s: role %s, replica %s not online", prim.addr(), pi["role"], rep.addr())
	}
	ri, err := sentinel.ReplicationInfo(ctx, p.publishedAddr(1-primIdx))
	if err != nil {
		return err
	}
	if ri["role"] != "slave" || ri["master_host"] != prim.ip || ri["master_link_status"] != "up" {
		return fmt.Errorf("replica %s: role %s of %s, link %s", rep.addr(), ri["role"], ri["master_host"], ri["master_link_status"])
	}
	return s.KnowsReplica(ctx, p.name, rep.addr())
}

// waitWhole waits, checking every t.Period, until the pair is whole, for
// at most bound.
func (p *pair) waitWhole(ctx context.Context, s *sentinel.Client, t sentinel.Timing, bound time.Duration) error {
	return sentinel.Poll(ctx, t.Period, bound, func() error { return p.whole(ctx, s, t) }, nil)
}

// waitPrimary waits until Sentinel names server want the primary and the
// relay leads to it, for at most bound. It asks Sentinel every t.Period,
// and wakes at once when the watch moves the relay.
func (p *pair) waitPrimary(ctx context.Context, s *sentinel.Client, want int, t sentinel.Timing, bound time.Duration) error {
	return sentinel.Poll(ctx, t.Period, bound, func() error {
		addr, err := s.Primary(ctx, p.name, t.DownAfter)
		if err != nil {
			return err
		}
		p.follow(addr)
		if got := p.primaryIndex(); got != want {
			return fmt.Errorf("sentinel names %s, not %s", p.servers[got].addr(), p.servers[want].addr())
		}
		return nil
	}, p.changedCh)
}

// holdBack switches off, on server s, the users its replica and Sentinel
// connect as, and closes their connections: they cannot connect again,
// and nothing more it acknowledges reaches them.
func (p *pair) holdBack(ctx context.Context, s int, timeout time.Duration) error {
	return p.setLinks(ctx, s, "off", timeout)
}

// letThrough switches those users on again.
func (p *pair) letThrough(ctx context.Context, s int, timeout time.Duration) error {
	return p.setLinks(ctx, s, "on", timeout)
}

func (p *pair) setLinks(ctx context.Context, s int, state string, timeout time.Duration) error {
	addr := p.publishedAddr(s)
	var errs []error
	for _, u := range []string{replUser, sentinelUser} {
		errs = append(errs, sentinel.Command(ctx, addr, timeout, "ACL", "SETUSER", u, state))
		if state == "off" {
			errs = append(errs, sentinel.Command(ctx, addr, timeout, "CLIENT", "KILL", "USER", u))
		}
	}
	return errors.Join(errs...)
}

// remove removes both containers.
func (p *pair) remove(ctx context.Context, cli client.APIClient) error {
	var errs []error
	for _, s := range p.servers {
		if s != nil {
			errs = append(errs, s.remove(ctx, cli))
		}
	}
	return errors.Join(errs...)
}
