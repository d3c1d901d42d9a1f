package docker

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/containerd/errdefs"
	mobynet "github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/network"
)

// Sentinel knows a pair's servers by their addresses on the network, so
// each must keep its address across every stop and start of its
// container. Docker does not promise that: a container that starts again
// takes the first free address, which is another's while that one is
// stopped (two stopped servers start again in the other order, say). So a
// replicated backend's network has a subnet of its own configuration, on
// which Docker lets each container ask for a fixed address, and every
// container on it has one: a container with none could take a stopped
// server's.

// claimSubnetTries bounds claimSubnet's retries: each is lost only to a
// network created by someone else within its few milliseconds.
const claimSubnetTries = 3

// claimSubnet replaces the network nw, whose subnet Docker chose from
// its free pools, by one configured with that same subnet, and readies
// the fixed addresses handed out by fixedIP.
func (d *Backend) claimSubnet(ctx context.Context, nw *testcontainers.DockerNetwork) (*testcontainers.DockerNetwork, error) {
	var err error
	for range claimSubnetTries {
		var ins client.NetworkInspectResult
		ins, err = d.cli.NetworkInspect(ctx, nw.ID, client.NetworkInspectOptions{})
		if err != nil {
			return nw, fmt.Errorf("docker: inspect network: %w", err)
		}
		var cfg mobynet.IPAMConfig
		for _, c := range ins.Network.IPAM.Config {
			if c.Subnet.Addr().Is4() {
				cfg = c
			}
		}
		if !cfg.Subnet.IsValid() || !cfg.Gateway.IsValid() {
			return nw, fmt.Errorf("docker: network %s has no IPv4 subnet and gateway: %+v", nw.Name, ins.Network.IPAM.Config)
		}
		if err := nw.Remove(ctx); err != nil && !errdefs.IsNotFound(err) {
			return nil, fmt.Errorf("docker: remove network: %w", err)
		}
		nw, err = network.New(ctx, network.WithLabels(d.labels), network.WithIPAM(&mobynet.IPAM{
			Driver: "default",
			Config: []mobynet.IPAMConfig{{Subnet: cfg.Subnet, Gateway: cfg.Gateway}},
		}))
		if err == nil {
			d.subnet, d.lastIP = cfg.Subnet, cfg.Gateway
			return nw, nil
		}
		// Taken meanwhile: let Docker choose another.
		if nw, err = network.New(ctx, network.WithLabels(d.labels)); err != nil {
			return nil, fmt.Errorf("docker: docker network: %w", err)
		}
	}
	return nw, fmt.Errorf("docker: claim a subnet for fixed addresses: %w", err)
}

// fixedIP hands out the next free address of the claimed subnet, as a
// modifier of a container request; without a claimed subnet, none.
func (d *Backend) fixedIP() (func(map[string]*mobynet.EndpointSettings), error) {
	if !d.subnet.IsValid() {
		return nil, nil
	}
	ip := d.lastIP.Next()
	if !d.subnet.Contains(ip) || ip == lastAddr(d.subnet) {
		return nil, errors.New("docker: no free address left on the network")
	}
	d.lastIP = ip
	name := d.net.Name
	return func(eps map[string]*mobynet.EndpointSettings) {
		ep := eps[name]
		if ep == nil {
			ep = &mobynet.EndpointSettings{}
			eps[name] = ep
		}
		ep.IPAMConfig = &mobynet.EndpointIPAMConfig{IPv4Address: ip}
	}, nil
}

// lastAddr is the broadcast address of an IPv4 prefix.
func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 1
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3]) | host
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}
