package process

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/internal/redisproc"
)

// sentinelTiming is how fast the Sentinel of a replicated backend acts,
// derived from the lock TTL of the workload and from the one period fixed
// in Sentinel's code: during a failover it asks the replicas for INFO every
// second (sentinelInfoDuringFailover).
type sentinelTiming struct {
	// ping is Sentinel's ping period: a quarter of that second. Sentinel
	// trusts a replica's INFO for five ping periods when it picks one to
	// promote, so five must exceed the second with room for its timer's
	// 100ms ticks; a shorter period leaves it no replica to promote.
	ping time.Duration
	// downAfter is Sentinel's down-after-milliseconds: half the TTL, so
	// that a failover is over while the holds granted just before it are
	// still valid, and the key the promoted replica lacks is one a holder
	// still relies on; but at least four ping periods, since Sentinel
	// declares down a server whose first PONG on a new link comes later
	// than that (it makes a new link to every primary it switches to).
	// With a TTL under 2s, holds granted in a failover's lag may expire
	// before the promotion: the fence counter increments are still lost.
	downAfter time.Duration
	// period is Sentinel's INFO, hello, ask and reconnect period: a tenth
	// of the TTL, so that Sentinel sees a role change or a server coming
	// back within a tenth of a hold's life (its timer ticks every 100ms:
	// a shorter period acts as 100ms).
	period time.Duration
	// failoverTimeout is Sentinel's failover-timeout, which bounds each
	// step of a failover. Sentinel learns that the replica took the
	// promotion from its INFO, asked for every second: three such
	// seconds, or twice the TTL if longer.
	failoverTimeout time.Duration
}

// sentinelInfoDuringFailover is the INFO period Sentinel keeps, fixed in
// its code, for the replicas of a primary that is down or being failed
// over.
const sentinelInfoDuringFailover = time.Second

func timingFor(ttl time.Duration) sentinelTiming {
	ping := sentinelInfoDuringFailover / 4
	return sentinelTiming{
		ping:            ping,
		downAfter:       max(ttl/2, 4*ping),
		period:          max(ttl/10, time.Millisecond),
		failoverTimeout: max(3*sentinelInfoDuringFailover, 2*ttl),
	}
}

// settle bounds every wait on Sentinel: its detection (downAfter), the
// wait it keeps between two failovers of one primary (twice the failover
// timeout) and one attempt.
func (t sentinelTiming) settle() time.Duration { return t.downAfter + 3*t.failoverTimeout }

// sentinel is the one Sentinel process of a replicated backend, and the
// goroutine that moves each node's relay to the primary Sentinel names
// (on +switch-master, and in full whenever its subscription is made anew).
type sentinel struct {
	proc   *redisproc.Proc
	client *redis.SentinelClient
	pubsub *redis.PubSub
	wg     sync.WaitGroup // the watch goroutine
}

// startSentinel starts a Sentinel monitoring every pair (quorum 1) at its
// primary's replication address, with the timing t, and waits until it
// knows each pair's replica.
func startSentinel(ctx context.Context, pairs []*pair, t sentinelTiming, startTimeout time.Duration) (*sentinel, error) {
	dir, err := os.MkdirTemp("", "sentinel-")
	if err != nil {
		return nil, fmt.Errorf("process: sentinel: %w", err)
	}
	var conf strings.Builder
	for _, p := range pairs {
		_, port, _ := net.SplitHostPort(p.repl[p.primaryIndex()].Addr())
		fmt.Fprintf(&conf, "sentinel monitor %s 127.0.0.1 %s 1\n", p.name, port)
		fmt.Fprintf(&conf, "sentinel down-after-milliseconds %s %d\n", p.name, t.downAfter.Milliseconds())
		fmt.Fprintf(&conf, "sentinel failover-timeout %s %d\n", p.name, t.failoverTimeout.Milliseconds())
	}
	file := filepath.Join(dir, "sentinel.conf") // Sentinel rewrites it
	if err := os.WriteFile(file, []byte(conf.String()), 0o600); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("process: sentinel: %w", err)
	}
	proc, err := redisproc.Start(ctx, redisproc.Config{Dir: dir, ConfigFile: file, Args: []string{"--sentinel"}, StartTimeout: startTimeout})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("process: sentinel: %w", err)
	}
	s := &sentinel{proc: proc, client: redis.NewSentinelClient(&redis.Options{Addr: proc.Addr(), Protocol: 2})}
	ms := strconv.FormatInt(t.period.Milliseconds(), 10)
	if err := command(ctx, proc.Addr(), startTimeout, "SENTINEL", "DEBUG", "info-period", ms,
		"ping-period", strconv.FormatInt(t.ping.Milliseconds(), 10), "publish-period", ms, "ask-period", ms, "min-link-reconnect-period", ms); err != nil {
		s.close()
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("process: sentinel: set its periods: %w", err)
	}
	for _, p := range pairs {
		if err := p.waitWhole(ctx, s, t, startTimeout+t.settle()); err != nil {
			s.close()
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("process: %s: %w", p.name, err)
		}
	}
	return s, nil
}

// watch follows Sentinel's +switch-master events until close.
func (s *sentinel) watch(pairs []*pair) {
	byName := make(map[string]*pair, len(pairs))
	for _, p := range pairs {
		byName[p.name] = p
	}
	s.pubsub = s.client.Subscribe(context.Background(), "+switch-master")
	ch := s.pubsub.ChannelWithSubscriptions()
	s.wg.Go(func() {
		for m := range ch {
			switch m := m.(type) {
			case *redis.Subscription:
				// (Re)subscribed: an event may have been missed meanwhile.
				for _, p := range pairs {
					_ = s.follow(context.Background(), p, time.Second)
				}
			case *redis.Message:
				// "<name> <old ip> <old port> <new ip> <new port>"
				if f := strings.Fields(m.Payload); len(f) == 5 && byName[f[0]] != nil {
					byName[f[0]].follow(net.JoinHostPort(f[3], f[4]))
				}
			}
		}
	})
}

// follow asks Sentinel for p's primary and moves p's relay to it.
func (s *sentinel) follow(ctx context.Context, p *pair, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	addr, err := s.client.GetMasterAddrByName(ctx, p.name).Result()
	if err != nil {
		return err
	}
	if len(addr) != 2 {
		return fmt.Errorf("sentinel: primary of %s: %q", p.name, addr)
	}
	p.follow(net.JoinHostPort(addr[0], addr[1]))
	return nil
}

// knowsReplica reports whether Sentinel knows addr as a replica of p's
// primary, and sees it up: the condition for Sentinel to promote it.
func (s *sentinel) knowsReplica(ctx context.Context, p *pair, addr string) error {
	replicas, err := s.client.Replicas(ctx, p.name).Result()
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

// logTail is the last n lines of Sentinel's log, joined by " | ".
func (s *sentinel) logTail(n int) string {
	b, err := os.ReadFile(filepath.Join(s.proc.Dir(), "redis.log"))
	if err != nil {
		return "(no log)"
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], " | ")
}

func (s *sentinel) close() error {
	if s.pubsub != nil {
		_ = s.pubsub.Close()
	}
	s.wg.Wait()
	_ = s.client.Close()
	err := s.proc.Close()
	_ = os.RemoveAll(s.proc.Dir())
	return err
}
