package redlockprom_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/fencedlock/fencedlock/internal/redisproc"
)

// redisAddrs are three redis-server nodes that the Example functions lock
// on, as a user's code would on its own servers.
var redisAddrs []string

func TestMain(m *testing.M) {
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
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
