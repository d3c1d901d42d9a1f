package sentinel

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Client asks one Sentinel about its pairs and follows its +switch-master
// events. Its methods are safe for concurrent use.
type Client struct {
	c      *redis.SentinelClient
	pubsub *redis.PubSub
	wg     sync.WaitGroup // the watch goroutine
}

// NewClient is a client of the Sentinel at addr.
func NewClient(addr string) *Client {
	return &Client{c: redis.NewSentinelClient(&redis.Options{Addr: addr, Protocol: 2})}
}

// Watch calls follow(name, host:port) with the primary Sentinel names for
// pair name, at each +switch-master and for every name of names whenever
// the subscription is made (anew: an event may have been missed meanwhile),
// until Close. follow runs on one goroutine, one call at a time.
func (s *Client) Watch(names []string, follow func(name, addr string)) {
	known := make(map[string]bool, len(names))
	for _, n := range names {
		known[n] = true
	}
	s.pubsub = s.c.Subscribe(context.Background(), "+switch-master")
	ch := s.pubsub.ChannelWithSubscriptions()
	s.wg.Go(func() {
		for m := range ch {
			switch m := m.(type) {
			case *redis.Subscription:
				for _, n := range names {
					if addr, err := s.Primary(context.Background(), n, time.Second); err == nil {
						follow(n, addr)
					}
				}
			case *redis.Message:
				// "<name> <old ip> <old port> <new ip> <new port>"
				if f := strings.Fields(m.Payload); len(f) == 5 && known[f[0]] {
					follow(f[0], net.JoinHostPort(f[3], f[4]))
				}
			}
		}
	})
}

// Primary is the host:port of the primary Sentinel names for pair name.
func (s *Client) Primary(ctx context.Context, name string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	addr, err := s.c.GetMasterAddrByName(ctx, name).Result()
	if err != nil {
		return "", err
	}
	if len(addr) != 2 {
		return "", fmt.Errorf("sentinel: primary of %s: %q", name, addr)
	}
	return net.JoinHostPort(addr[0], addr[1]), nil
}

// KnowsReplica reports whether Sentinel knows addr (host:port, as Sentinel
// reaches it) as a replica of pair name's primary, and sees it up: the
// condition for Sentinel to promote it.
func (s *Client) KnowsReplica(ctx context.Context, name, addr string) error {
	replicas, err := s.c.Replicas(ctx, name).Result()
	if err != nil {
		return err
	}
	for _, r := range replicas {
		if net.JoinHostPort(r["ip"], r["port"]) != addr {
			continue
		}
		if r["flags"] != "slave" {
			return fmt.Errorf("sentinel sees replica %s as %q", addr, r["flags"])
		}
		return nil
	}
	return fmt.Errorf("sentinel does not know replica %s yet", addr)
}

// Close ends the watch and the client's connections.
func (s *Client) Close() {
	if s.pubsub != nil {
		_ = s.pubsub.Close()
	}
	s.wg.Wait()
	_ = s.c.Close()
}
