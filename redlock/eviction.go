package redlock

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Under maxmemory, Redis evicts keys by its maxmemory-policy, and the lock
// relies on two kinds of keys. Fence counters never expire: an allkeys-*
// policy can evict them, and a counter evicted then restarts at 1, so
// tokens go backwards. Lock keys have a TTL: a volatile-* policy (and an
// allkeys-* one) can evict them, which ends a hold before its TTL. The safe
// settings are maxmemory 0 (no limit) and noeviction (a full node refuses
// writes, so acquisitions fail instead).
//
// checkNode looks, once per node, at the first use of the node, in the
// background, and warns through the logger when the node can evict them.
// Errors are logged at Debug only: CONFIG may be renamed or disabled, as on
// managed services.

// checkTimeout bounds the check: the node timeout, or the largest default.
func (c *Client) checkTimeout() time.Duration {
	if c.cfg.nodeTimeout > 0 {
		return c.cfg.nodeTimeout
	}
	return 500 * time.Millisecond
}

// checkNode starts node i's eviction check unless it ran already or the
// client is closing. It does not block.
func (c *Client) checkNode(i int) {
	c.nodes[i].checked.Do(func() {
		select {
		case <-c.life.Done():
		default:
			c.goNode(i, func() { c.checkEviction(i) })
		}
	})
}

// checkEviction reads the policy of each server behind node i and warns at
// most once. It waits at most the check timeout, or until Close: a call that
// go-redis holds longer (a frozen server, a client without
// ContextTimeoutEnabled) finishes in a goroutine of its own that ends with
// the call, and is ignored.
func (c *Client) checkEviction(i int) {
	timeout := c.checkTimeout()
	got := make(chan []serverPolicy, 1)
	go func() {
		defer c.recoverNode(i)
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		got <- readPolicies(ctx, c.nodes[i].rdb)
	}()
	t := time.NewTimer(timeout) // a network wait: real time
	defer t.Stop()
	var policies []serverPolicy
	select {
	case policies = <-got:
	case <-t.C:
		c.logCheck(i, "", context.DeadlineExceeded)
		return
	case <-c.life.Done():
		return
	}
	warned := false
	for _, p := range policies {
		if p.err != nil {
			c.logCheck(i, p.server, p.err)
			continue
		}
		attrs := []slog.Attr{slog.Int("node", i), slog.String("addr", c.nodes[i].addr), slog.String("server", p.server),
			slog.String("maxmemory", p.maxmemory), slog.String("maxmemory-policy", p.policy)}
		c.cfg.logger.LogAttrs(context.Background(), slog.LevelDebug, "redlock: node eviction policy", attrs...)
		if risk := evictionRisk(p.maxmemory, p.policy); risk != "" && !warned {
			warned = true // once per node, however many servers it has
			c.cfg.logger.LogAttrs(context.Background(), slog.LevelWarn, "redlock: "+risk, attrs...)
		}
	}
}

func (c *Client) logCheck(i int, server string, err error) {
	c.cfg.logger.LogAttrs(context.Background(), slog.LevelDebug, "redlock: could not read the node's eviction policy",
		slog.Int("node", i), slog.String("addr", c.nodes[i].addr), slog.String("server", server), slog.Any("err", err))
}

// evictionRisk says what a server with this maxmemory and policy can evict,
// or "" when it evicts nothing the lock relies on.
func evictionRisk(maxmemory, policy string) string {
	switch {
	case maxmemory == "0" || policy == "noeviction":
		return ""
	case strings.HasPrefix(policy, "allkeys-"):
		return "node can evict fence counters and lock keys (maxmemory with an allkeys-* policy): " +
			"tokens can restart at 1 and holds can end early; use maxmemory-policy noeviction"
	case strings.HasPrefix(policy, "volatile-"):
		return "node can evict lock keys (maxmemory with a volatile-* policy): " +
			"holds can end before their TTL; use maxmemory-policy noeviction"
	}
	return ""
}

type serverPolicy struct {
	server    string
	maxmemory string
	policy    string
	err       error
}

// readPolicies reads maxmemory and maxmemory-policy from each server behind
// rdb: every shard of a Ring, every primary of a Cluster, else rdb itself.
func readPolicies(ctx context.Context, rdb redis.UniversalClient) []serverPolicy {
	var (
		mu  sync.Mutex
		out []serverPolicy
	)
	each := func(ctx context.Context, c *redis.Client) error {
		p := readPolicy(ctx, c)
		p.server = c.Options().Addr
		mu.Lock()
		out = append(out, p)
		mu.Unlock()
		return nil
	}
	var err error
	switch v := rdb.(type) {
	case *redis.Ring:
		err = v.ForEachShard(ctx, each)
	case *redis.ClusterClient:
		err = v.ForEachMaster(ctx, each)
	default:
		out = append(out, readPolicy(ctx, rdb)) // server: the node's addr says it
	}
	if err != nil {
		out = append(out, serverPolicy{err: err})
	}
	return out
}

func readPolicy(ctx context.Context, rdb redis.UniversalClient) serverPolicy {
	cfg, err := rdb.ConfigGet(ctx, "maxmemory*").Result()
	if err != nil {
		return serverPolicy{err: err}
	}
	return serverPolicy{maxmemory: cfg["maxmemory"], policy: cfg["maxmemory-policy"]}
}
