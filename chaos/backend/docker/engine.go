package docker

import (
	"context"
	"fmt"
	"net"
	"os"

	"github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/authconfig"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

// findHost decides where clients dial published ports, and whether that is
// this machine: then ports are published on loopback only (the nodes run
// with protected mode off, and need not be seen from the network).
//
// testcontainers-go's answer is right for a remote engine and when
// TESTCONTAINERS_HOST_OVERRIDE is set, but it takes the default gateway
// whenever /.dockerenv exists, which some virtual machines built from
// container images have too. So when the gateway of the nodes' own network
// is an address of this machine, the engine runs in this network namespace,
// and its ports are on 127.0.0.1.
func (d *Backend) findHost(ctx context.Context) error {
	host, err := d.provider.DaemonHost(ctx)
	if err != nil {
		return fmt.Errorf("docker: docker host: %w", err)
	}
	if _, override := os.LookupEnv("TESTCONTAINERS_HOST_OVERRIDE"); !override && d.gatewayIsLocal(ctx) {
		host = "localhost"
	}
	if host == "localhost" {
		host = "127.0.0.1" // not ::1: ports are published on IPv4
	}
	ip := net.ParseIP(host)
	d.host, d.loopback = host, ip != nil && ip.IsLoopback()
	return nil
}

// gatewayIsLocal reports whether the gateway of the nodes' network is one of
// this machine's interface addresses.
func (d *Backend) gatewayIsLocal(ctx context.Context) bool {
	ins, err := d.cli.NetworkInspect(ctx, d.net.ID, client.NetworkInspectOptions{})
	if err != nil {
		return false
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, c := range ins.Network.IPAM.Config {
		for _, a := range addrs {
			if p, ok := a.(*net.IPNet); ok && c.Gateway.IsValid() && p.IP.Equal(net.IP(c.Gateway.AsSlice())) {
				return true
			}
		}
	}
	return false
}

// ensureImage pulls the image, once, if the engine does not have it.
// testcontainers-go would retry a failing pull for many minutes; where no
// registry answers, one attempt is enough to know.
func (d *Backend) ensureImage(ctx context.Context) error {
	ref := d.cfg.image
	_, err := d.cli.ImageInspect(ctx, ref)
	if err == nil {
		return nil
	}
	if !errdefs.IsNotFound(err) {
		return fmt.Errorf("docker: image %s: %w", ref, err)
	}
	var opts client.ImagePullOptions
	if _, auth, err := testcontainers.DockerImageAuth(ctx, ref); err == nil {
		if enc, err := authconfig.Encode(auth); err == nil {
			opts.RegistryAuth = enc
		}
	}
	pull, err := d.cli.ImagePull(ctx, ref, opts)
	if err == nil {
		err = pull.Wait(ctx)
	}
	if err != nil {
		return fmt.Errorf("%w: %s is not in the engine, and pulling it failed: %w", ErrNoImage, ref, err)
	}
	return nil
}
