package docker

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"

	"github.com/fencedlock/fencedlock/chaos/internal/sentinel"
)

// sentinelConf is where the Sentinel container keeps its configuration
// file, which it rewrites: in the image's working directory, writable.
const sentinelConf = "/data/sentinel.conf"

// sentinelCtr is the one Sentinel container of a replicated backend, on
// the Backend's network, and the client that follows its +switch-master
// events through the port Docker publishes for it.
type sentinelCtr struct {
	srv *server
	*sentinel.Client
}

// startSentinel starts a Sentinel container monitoring every pair (quorum
// 1) at its primary's address on the network, with the Backend's timing,
// makes each pair follow it, and waits until it knows each pair's
// replica. On error it returns what it started, for Close to remove.
func (d *Backend) startSentinel(ctx context.Context, pairs []*pair) (*sentinelCtr, error) {
	var ms []sentinel.Monitor
	var names []string
	byName := make(map[string]*pair, len(pairs))
	for _, p := range pairs {
		prim := p.servers[p.primaryIndex()]
		ms = append(ms, sentinel.Monitor{Name: p.name, Host: prim.ip, Port: strconv.Itoa(redisPort), AuthUser: sentinelUser})
		names = append(names, p.name)
		byName[p.name] = p
	}
	req := d.request("fencedlock-chaos-"+d.run+"-sentinel", []string{sentinelConf, "--sentinel", "--port", strconv.Itoa(redisPort), "--protected-mode", "no"})
	req.Files = []testcontainers.ContainerFile{{Reader: strings.NewReader(sentinel.Config(ms, d.timing)), ContainerFilePath: sentinelConf, FileMode: 0o666}}
	fixed, err := d.fixedIP()
	if err != nil {
		return nil, fmt.Errorf("docker: sentinel: %w", err)
	}
	req.EndpointSettingsModifier = fixed
	srv, err := d.startContainer(ctx, req, &server{}, nil)
	if srv == nil {
		return nil, fmt.Errorf("docker: sentinel: %w", err)
	}
	s := &sentinelCtr{srv: srv}
	if err != nil {
		return s, fmt.Errorf("docker: sentinel: %w", err)
	}
	if err := sentinel.SetPeriods(ctx, srv.published, d.timing, d.cfg.startTimeout); err != nil {
		return s, fmt.Errorf("docker: %w", err)
	}
	// The published port stays while the container runs: Sentinel is
	// never stopped, paused nor disconnected.
	s.Client = sentinel.NewClient(srv.published)
	s.Watch(names, func(name, addr string) { byName[name].follow(addr) })
	for _, p := range pairs {
		if err := p.waitWhole(ctx, s.Client, d.timing, d.cfg.startTimeout+d.timing.Settle()); err != nil {
			return s, fmt.Errorf("docker: %s: %w", p.name, err)
		}
	}
	return s, nil
}

// logTail is the end of Sentinel's log, for errors.
func (s *sentinelCtr) logTail(ctx context.Context) string { return logTail(ctx, s.srv.ctr) }

// close ends the watch and removes the container.
func (s *sentinelCtr) close(ctx context.Context, cli client.APIClient) error {
	if s.Client != nil {
		s.Close()
	}
	return s.srv.remove(ctx, cli)
}
