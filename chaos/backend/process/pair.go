package process

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/fencedlock/fencedlock/chaos/internal/netfault"
	"github.com/fencedlock/fencedlock/chaos/internal/relay"
	"github.com/fencedlock/fencedlock/chaos/internal/sentinel"
	"github.com/fencedlock/fencedlock/internal/holdproxy"
	"github.com/fencedlock/fencedlock/internal/redisproc"
)

// pair is one node of a backend started WithReplicas: two redis-server
// processes, a primary and its replica. Each server is known to Sentinel
// and to its peer by the address of a hold proxy in front of it (its
// replication address), so that what a primary sends its replica (and
// Sentinel) can be held back. Clients reach the pair through a relay that
// Sentinel's word moves to the current primary's own address, never
// through a hold proxy: a primary acknowledges their writes at once.
type pair struct {
	name string // Sentinel's name for it
	node int    // the backend's index of it
	// promotions hears of every move of the primary (set before the watch
	// starts; read-only after).
	promotions *sentinel.Promotions
	procs      [2]*redisproc.Proc
	repl       [2]*holdproxy.Proxy // replication addresses, by server
	relay      *relay.Relay

	mu      sync.Mutex    // protects primary, changed
	primary int           // index in procs of the primary Sentinel last named
	changed chan struct{} // closed and replaced when primary changes
}

// startPair starts two servers, makes the second a replica of the first
// and a relay to the first.
func startPair(ctx context.Context, name string, cfg config) (*pair, error) {
	p := &pair{name: name, changed: make(chan struct{})}
	for s := range p.procs {
		proc, repl, err := startServer(ctx, cfg)
		if err != nil {
			p.close()
			return nil, err
		}
		p.procs[s], p.repl[s] = proc, repl
	}
	host, port, _ := net.SplitHostPort(p.repl[0].Addr())
	if err := sentinel.Command(ctx, p.procs[1].Addr(), cfg.startTimeout, "REPLICAOF", host, port); err != nil {
		p.close()
		return nil, fmt.Errorf("replica: %w", err)
	}
	// The relay's own fault state stays healthy: partitions act in the
	// node's proxy, in front of it.
	r, err := relay.New(netfault.NewState())
	if err != nil {
		p.close()
		return nil, err
	}
	r.SetUpstream(p.procs[0].Addr())
	p.relay = r
	return p, nil
}

// startServer starts one server of a pair behind its replication proxy,
// announcing the proxy's port to its primary (and so to Sentinel). The
// server's port is chosen before it starts, to name it in the proxy: one
// taken meanwhile is retried with another. A primary starts a full
// synchronisation at once (Redis waits 5s by default for more replicas to
// share it: a pair has one).
func startServer(ctx context.Context, cfg config) (*redisproc.Proc, *holdproxy.Proxy, error) {
	var err error
	for range 5 {
		var port int
		if port, err = redisproc.FreePort(); err != nil {
			return nil, nil, err
		}
		var repl *holdproxy.Proxy
		if repl, err = holdproxy.Start(net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err != nil {
			return nil, nil, err
		}
		_, announce, _ := net.SplitHostPort(repl.Addr())
		var proc *redisproc.Proc
		proc, err = redisproc.Start(ctx, redisproc.Config{
			Binary:       cfg.binary,
			Port:         port,
			AOF:          true,
			Args:         append([]string{"--replica-announce-port", announce, "--repl-diskless-sync-delay", "0"}, cfg.args...),
			StartTimeout: cfg.startTimeout,
		})
		if err == nil {
			return proc, repl, nil
		}
		_ = repl.Close()
		if ctx.Err() != nil {
			break
		}
	}
	return nil, nil, err
}

// primaryIndex is the index of the primary Sentinel last named.
func (p *pair) primaryIndex() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.primary
}

// follow makes the server whose replication address is addr the primary
// and moves the relay to it. An address of neither server is ignored.
func (p *pair) follow(addr string) {
	var changed chan struct{} // the one the move closes, once it is reported
	var report func()
	p.mu.Lock()
	for s, r := range p.repl {
		if r.Addr() != addr || s == p.primary {
			continue
		}
		p.primary = s
		p.relay.Retarget(p.procs[s].Addr())
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

// whole checks once that the pair is whole: the primary Sentinel names
// has the other server attached as a replica that is in sync and that
// Sentinel sees up. Each call is bounded by t.DownAfter: a server that
// does not answer within it is down to Sentinel too.
func (p *pair) whole(ctx context.Context, s *sentinelProc, t sentinel.Timing) error {
	ctx, cancel := context.WithTimeout(ctx, t.DownAfter)
	defer cancel()
	if err := s.follow(ctx, p, t.DownAfter); err != nil {
		return err
	}
	prim := p.primaryIndex()
	rep := 1 - prim
	replHost, replPort, _ := net.SplitHostPort(p.repl[rep].Addr())
	pi, err := sentinel.ReplicationInfo(ctx, p.procs[prim].Addr())
	if err != nil {
		return err
	}
	if pi["role"] != "master" || sentinel.ReplicaState(pi, replHost, replPort) != "online" {
		return fmt.Errorf("primary %s: role %s, replica %s not online", p.procs[prim].Addr(), pi["role"], p.repl[rep].Addr())
	}
	_, primPort, _ := net.SplitHostPort(p.repl[prim].Addr())
	ri, err := sentinel.ReplicationInfo(ctx, p.procs[rep].Addr())
	if err != nil {
		return err
	}
	if ri["role"] != "slave" || ri["master_port"] != primPort || ri["master_link_status"] != "up" {
		return fmt.Errorf("replica %s: role %s of port %s, link %s", p.procs[rep].Addr(), ri["role"], ri["master_port"], ri["master_link_status"])
	}
	return s.KnowsReplica(ctx, p.name, p.repl[rep].Addr())
}

// waitWhole waits, checking every t.Period, until the pair is whole, for
// at most bound.
func (p *pair) waitWhole(ctx context.Context, s *sentinelProc, t sentinel.Timing, bound time.Duration) error {
	return sentinel.Poll(ctx, t.Period, bound, func() error { return p.whole(ctx, s, t) }, nil)
}

// waitPrimary waits until Sentinel names server want the primary and the
// relay leads to it, for at most bound. It asks Sentinel every t.Period,
// and wakes at once when the watch moves the relay.
func (p *pair) waitPrimary(ctx context.Context, s *sentinelProc, want int, t sentinel.Timing, bound time.Duration) error {
	return sentinel.Poll(ctx, t.Period, bound, func() error {
		if err := s.follow(ctx, p, t.DownAfter); err != nil {
			return err
		}
		if got := p.primaryIndex(); got != want {
			return fmt.Errorf("sentinel names %s, not %s", p.repl[got].Addr(), p.repl[want].Addr())
		}
		return nil
	}, p.changedCh)
}

func (p *pair) changedCh() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.changed
}

// close stops the relay, the servers and their proxies.
func (p *pair) close() error {
	if p.relay != nil {
		p.relay.Close()
	}
	var errs []error
	for s := range p.procs {
		if p.procs[s] != nil {
			errs = append(errs, p.procs[s].Close())
		}
		if p.repl[s] != nil {
			errs = append(errs, p.repl[s].Close())
		}
	}
	return errors.Join(errs...)
}
