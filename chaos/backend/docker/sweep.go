package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

// Labels on every container, volume and network a Docker backend creates.
// The backend removes its own on Close; Sweep removes those of
// backends whose process died before it could (Ryuk is not needed, and its
// image may not be available where nothing can be pulled).
const (
	// LabelChaos marks a resource as the chaos harness's ("1").
	LabelChaos = "fencedlock.chaos"
	// LabelRun names the Docker backend that created it.
	LabelRun = "fencedlock.chaos.run"
	// LabelOwner is the owning process, "hostname/pid".
	LabelOwner = "fencedlock.chaos.owner"
)

// owner is this process's LabelOwner value.
func owner() string {
	host, _ := os.Hostname()
	return host + "/" + strconv.Itoa(os.Getpid())
}

// SweepOption configures Sweep.
type SweepOption func(*sweepConfig)

type sweepConfig struct{ own bool }

// SweepOwn makes Sweep remove this process's resources too, not only
// those of dead processes: for the end of a test binary, after every Docker
// backend it started was closed, to catch what a failed Close left.
func SweepOwn() SweepOption { return func(c *sweepConfig) { c.own = true } }

// Sweep removes the containers, volumes and networks labelled
// LabelChaos whose owner process has ended on this host (a run that was
// killed, or a test binary that timed out), and returns how many it removed.
// Resources of live processes, and of other hosts sharing the engine, are
// left alone. The engine is found as testcontainers-go finds it (DOCKER_HOST,
// Docker contexts, ~/.testcontainers.properties), as for New.
func Sweep(ctx context.Context, opts ...SweepOption) (int, error) {
	var cfg sweepConfig
	for _, o := range opts {
		o(&cfg)
	}
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return 0, fmt.Errorf("docker: docker client: %w", err)
	}
	defer cli.Close()
	return sweep(ctx, cli, func(labels map[string]string) bool {
		o := labels[LabelOwner]
		if o == owner() {
			return cfg.own
		}
		return ownerGone(o)
	})
}

// ownerGone reports whether owner ("hostname/pid") names a process of this
// host that no longer runs.
func ownerGone(owner string) bool {
	host, pidText, ok := strings.Cut(owner, "/")
	me, _ := os.Hostname()
	pid, err := strconv.Atoi(pidText)
	if !ok || host != me || err != nil || pid <= 0 {
		return false
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return true
	}
	err = p.Signal(syscall.Signal(0))
	return err != nil && !errors.Is(err, syscall.EPERM)
}

// sweep removes the chaos resources whose labels match: containers first
// (with their anonymous volumes), then the volumes and networks they used.
func sweep(ctx context.Context, cli client.APIClient, match func(map[string]string) bool) (int, error) {
	f := make(client.Filters).Add("label", LabelChaos+"=1")
	var removed int
	var errs []error
	note := func(what, id string, err error) {
		switch {
		case err == nil:
			removed++
		case !errdefs.IsNotFound(err):
			errs = append(errs, fmt.Errorf("docker: sweep %s %.12s: %w", what, id, err))
		}
	}

	cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return 0, fmt.Errorf("docker: sweep: list containers: %w", err)
	}
	for _, c := range cs.Items {
		if match(c.Labels) {
			_, err := cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
			note("container", c.ID, err)
		}
	}
	vs, err := cli.VolumeList(ctx, client.VolumeListOptions{Filters: f})
	if err != nil {
		return removed, errors.Join(append(errs, fmt.Errorf("docker: sweep: list volumes: %w", err))...)
	}
	for _, v := range vs.Items {
		if match(v.Labels) {
			_, err := cli.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{Force: true})
			note("volume", v.Name, err)
		}
	}
	ns, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: f})
	if err != nil {
		return removed, errors.Join(append(errs, fmt.Errorf("docker: sweep: list networks: %w", err))...)
	}
	for _, n := range ns.Items {
		if match(n.Labels) {
			_, err := cli.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{})
			note("network", n.ID, err)
		}
	}
	return removed, errors.Join(errs...)
}
