// Package redistest starts real redis-server processes for tests, on
// ephemeral loopback ports, and removes them when the test ends.
package redistest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/internal/redisproc"
)

// Option changes the config of the started nodes.
type Option func(*redisproc.Config)

// WithAOF turns on the append-only file with appendfsync always.
func WithAOF() Option { return func(c *redisproc.Config) { c.AOF = true } }

// WithEnv adds environment variables to the server processes.
func WithEnv(env ...string) Option {
	return func(c *redisproc.Config) { c.Env = append(c.Env, env...) }
}

// WithArgs adds redis-server arguments, e.g. "--maxmemory", "10mb".
func WithArgs(args ...string) Option {
	return func(c *redisproc.Config) { c.Args = append(c.Args, args...) }
}

// Start starts one node; it is closed at the end of the test. The test fails
// at once when redis-server is not installed or does not start.
func Start(t testing.TB, opts ...Option) *redisproc.Proc {
	t.Helper()
	var cfg redisproc.Config
	for _, o := range opts {
		o(&cfg)
	}
	return startConfig(t, cfg)
}

func startConfig(t testing.TB, cfg redisproc.Config) *redisproc.Proc {
	t.Helper()
	p, err := redisproc.Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// StartN starts n nodes.
func StartN(t testing.TB, n int, opts ...Option) []*redisproc.Proc {
	t.Helper()
	procs := make([]*redisproc.Proc, n)
	for i := range procs {
		procs[i] = Start(t, opts...)
	}
	return procs
}

// Client returns a go-redis client for p, closed at the end of the test.
func Client(t testing.TB, p *redisproc.Proc) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: p.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Clients returns one client per node, as the redlock API takes them.
func Clients(t testing.TB, procs []*redisproc.Proc) []redis.UniversalClient {
	t.Helper()
	cs := make([]redis.UniversalClient, len(procs))
	for i, p := range procs {
		cs[i] = Client(t, p)
	}
	return cs
}

// PingRTT is a round trip that nine in ten PINGs to nodes beat: the unit
// the timing bounds of tests are multiples of, so that they stretch on a
// loaded machine instead of failing. (Not the slowest: one stray hiccup
// would make every bound, and the test, a hundred times longer.)
func PingRTT(t testing.TB, nodes []redis.UniversalClient) time.Duration {
	t.Helper()
	var rtts []time.Duration
	for i, n := range nodes {
		if err := n.Ping(t.Context()).Err(); err != nil { // dials
			t.Fatalf("node %d: %v", i, err)
		}
		for range max(10, 30/len(nodes)) {
			start := time.Now()
			if err := n.Ping(t.Context()).Err(); err != nil {
				t.Fatalf("node %d: %v", i, err)
			}
			rtts = append(rtts, time.Since(start))
		}
	}
	slices.Sort(rtts)
	p90 := rtts[len(rtts)*9/10]
	t.Logf("PING round trips: median %v, 90th percentile %v, slowest %v", rtts[len(rtts)/2], p90, rtts[len(rtts)-1])
	return p90
}

// AfterReply is a go-redis hook (add it with AddHook) that is called with
// each command, or each pipeline's commands, once their replies are read and
// before they are handed back to the caller: a moment between two steps of a
// real server that a test cannot otherwise pick.
type AfterReply func(cmds ...redis.Cmder)

func (f AfterReply) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f AfterReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		f(cmd)
		return err
	}
}

func (f AfterReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		f(cmds...)
		return err
	}
}
