package chaos

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/chaos/backend"
	"github.com/fencedlock/fencedlock/chaos/recorder"
)

// Probes: reads of each lock node's state for a key (GET and PTTL in one
// transaction), recorded for the checker's node guarantees (see
// history/nodes.go), made beside the lock:
//
//   - right after an acquire or an extend succeeded: how long the nodes
//     hold the hold's value, against its Until;
//   - right after an Unlock returned: how many still hold it;
//   - a release allowance after an Unlock returned (in the background, the
//     client goes on) or after a Lock failed: what the call left there.
//
// They go to each node's own address (backend.Direct), past the fault
// proxy: a partition or latency there cuts off the clients, not the node's
// state, and a probe through it would fail or lag and prove nothing. A
// node that is down or frozen fails the probe, which proves nothing either.
// Backends without direct addresses, and clients in processes of their own,
// are not probed.

// releaseAllowance is how long after a failed Lock or an Unlock returned
// a node may still hold what the call left there: a failed attempt waits
// for its missing replies at most a node timeout before it returns, and
// then sends the release of a late grant, which a node no fault touches
// answers within a node timeout; a try lost to the machine's load is sent
// again after the owed release's first backoff (a node timeout, see
// redlock's owe.go) and answered within another. Four node timeouts.
func (c Config) releaseAllowance() time.Duration { return 4 * c.NodeTimeout }

// prober holds the direct connections to the nodes.
type prober struct {
	rdbs      []*redis.Client
	timeout   time.Duration
	allowance time.Duration
}

// newProber connects to b's nodes directly; nil when b cannot. Each dial
// asks b for the address, which a restarted container may change.
func newProber(b backend.Backend, cfg Config) *prober {
	d, ok := b.(backend.Direct)
	if !ok {
		return nil
	}
	p := &prober{timeout: cfg.NodeTimeout, allowance: cfg.releaseAllowance()}
	for i := range b.Nodes() {
		p.rdbs = append(p.rdbs, redis.NewClient(&redis.Options{
			Addr: "direct-" + strconv.Itoa(i), // unused: Dialer resolves it
			Dialer: func(ctx context.Context, network, _ string) (net.Conn, error) {
				addr, err := directAddr(ctx, d, i)
				if err != nil {
					return nil, err
				}
				var nd net.Dialer
				return nd.DialContext(ctx, network, addr)
			},
			DialTimeout:           cfg.NodeTimeout,
			MaxRetries:            -1,
			ContextTimeoutEnabled: true,
			PoolSize:              2 * cfg.Clients,
		}))
	}
	return p
}

// directAddr is d.DirectAddr(i), or ctx's error if ctx ends first: a
// backend answers it only between the operations it runs on the node (the
// docker backend holds the node through a restart, seconds long), and a
// probe that waited for one would hold its client up; a probe that fails
// proves nothing, and the client goes on.
func directAddr(ctx context.Context, d backend.Direct, i int) (string, error) {
	type answer struct {
		addr string
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		addr, err := d.DirectAddr(i)
		got <- answer{addr, err}
	}()
	select {
	case a := <-got:
		return a.addr, a.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func (p *prober) close() {
	if p == nil {
		return
	}
	for _, r := range p.rdbs {
		_ = r.Close()
	}
}

// read reads key on node i: its value ("" when absent) and time to live.
func (p *prober) read(ctx context.Context, i int, key string) (string, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	var (
		get  *redis.StringCmd
		pttl *redis.DurationCmd
	)
	_, err := p.rdbs[i].TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		get, pttl = pipe.Get(ctx, key), pipe.PTTL(ctx, key)
		return nil
	})
	if errors.Is(err, redis.Nil) {
		return "", 0, nil
	}
	if err != nil {
		return "", 0, err
	}
	return get.Val(), max(pttl.Val(), 0), nil
}

// round probes every node for key, in parallel, recording each probe with
// begin; own tells which values found are the client's leftovers.
func (p *prober) round(key string, begin func(node int) *recorder.ProbeCall, own func(string) bool) {
	ctx := context.Background() // a probe is finished even when the run ends
	var wg sync.WaitGroup
	for i := range p.rdbs {
		wg.Go(func() {
			call := begin(i)
			v, ttl, err := p.read(ctx, i, key)
			switch {
			case err != nil:
				call.Fail(err)
			case v == "":
				call.NoKey()
			default:
				call.Found(v, ttl, own != nil && own(v))
			}
		})
	}
	wg.Wait()
}

// probeHold probes the nodes for h at once.
func (c *client) probeHold(h recorder.Hold) {
	if c.probe != nil {
		c.probe.round(h.Key(), func(n int) *recorder.ProbeCall { return h.Probe(n) }, nil)
	}
}

// probeAfterRelease probes the nodes for h at once, and again a release
// allowance later, in the background; own values are those made before
// the Unlock began, at unlockAt on the client's clock.
func (c *client) probeAfterRelease(ctx context.Context, h recorder.Hold, unlockAt time.Time) {
	if c.probe == nil {
		return
	}
	c.probeHold(h)
	own := c.ownBefore(unlockAt)
	c.probing.Go(func() {
		sleepReal(ctx, c.probe.allowance)
		if ctx.Err() == nil {
			c.probe.round(h.Key(), func(n int) *recorder.ProbeCall { return h.Probe(n) }, own)
		}
	})
}

// probeAfterFailure probes the nodes for key a release allowance after a
// Lock failed at failedAt on the client's clock.
func (c *client) probeAfterFailure(ctx context.Context, key string, failedAt time.Time) {
	if c.probe == nil {
		return
	}
	sleepReal(ctx, c.probe.allowance)
	if ctx.Err() == nil {
		c.probe.round(key, func(n int) *recorder.ProbeCall { return c.rec.Probe(key, n) }, c.ownBefore(failedAt))
	}
}

// ownBefore tells the values this client's lock made for calls begun
// before t, on the client's clock, and never returned to any of its lanes
// (a failed call's grants: the values Lock returned are holds, live or
// released, which the checker knows from the history): redlock's hold
// values end with the Client's id and begin with the time their call began
// to wait, in milliseconds (the UUID version 7 layout, see redlock's
// holdValue). The id is learnt from the client's first hold.
func (c *client) ownBefore(t time.Time) func(string) bool {
	c.valuesMu.Lock()
	id := c.lockID
	c.valuesMu.Unlock()
	return func(v string) bool {
		if id == "" || len(v) != 36 || !strings.HasSuffix(v, id) {
			return false
		}
		c.valuesMu.Lock()
		returned := c.held[v]
		c.valuesMu.Unlock()
		ms, err := strconv.ParseUint(v[0:8]+v[9:13], 16, 64)
		return !returned && err == nil && int64(ms) < t.UnixMilli()
	}
}
