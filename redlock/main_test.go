package redlock_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/fencedlock/fencedlock/internal/redisproc"
)

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// redisAddrs are three redis-server nodes that the Example functions lock
// on, as a user's code would on its own servers.
var redisAddrs []string

func TestMain(m *testing.M) {
	redis.SetLogger(quietLogger{}) // dial failures to killed nodes are expected here
	procs, err := redisproc.StartN(context.Background(), 3, redisproc.Config{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, p := range procs {
		redisAddrs = append(redisAddrs, p.Addr())
	}
	code := m.Run()
	for _, p := range procs {
		_ = p.Close()
	}
	if code == 0 {
		// go-redis's own redial loop, which a pool starts after PoolSize
		// failed dials to a killed node, sleeps a second between dials and
		// outlives the closed pool by up to that: it is not ours.
		if err := goleak.Find(goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial")); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
