// Command rate-limit is a fixed-window rate limiter in one Lua script: INCR
// and PEXPIRE run as one atomic step on the server (see limit.lua for why the
// two-step version is a bug). It sends more requests than the limit within
// one window, shows the first ones allowed and the rest limited, then waits
// for the window to reset, as a client honouring Retry-After would.
//
// A limiter needs no quorum: it runs on one node. If that node is lost, the
// counts of the current window are lost with it, which a limiter can afford.
//
//	go run ./examples/rate-limit [--nodes host:6379]
package main

import (
	"context"
	_ "embed"
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/clock"
	"github.com/fencedlock/fencedlock/internal/examplenodes"
)

var (
	//go:embed limit.lua
	limitLua    string
	limitScript = redis.NewScript(limitLua) // EVALSHA, falling back to EVAL
)

// allow counts one request against key and reports whether it is within limit
// for the current window, the count so far, and when the window resets.
func allow(ctx context.Context, rdb redis.Scripter, key string, limit int64, window time.Duration) (ok bool, n int64, reset time.Duration, err error) {
	res, err := limitScript.Run(ctx, rdb, []string{key}, window.Milliseconds()).Int64Slice()
	if err != nil {
		return false, 0, 0, fmt.Errorf("rate limit %s: %w", key, err)
	}
	n, reset = res[0], time.Duration(res[1])*time.Millisecond
	return n <= limit, n, reset, nil
}

func main() { examplenodes.Main("rate-limit", run) }

func run(ctx context.Context, args []string, stdout io.Writer) error {
	nodes, err := examplenodes.FromArgs(ctx, "rate-limit", args, 1)
	if err != nil {
		return err
	}
	defer nodes.Close()
	rdb := nodes.Clients[0]

	const limit, window = 5, 500 * time.Millisecond
	// One counter per user and window; a fresh user per run, so that reruns
	// against the same server start with an empty window.
	key := "ratelimit:user-" + uuid.NewString()[:8]
	fmt.Fprintf(stdout, "node: %s\nlimit %d requests per %v for %q\n", nodes.Addrs[0], limit, window, key)

	allowed, limited := 0, 0
	var reset time.Duration
	for i := 1; i <= limit+3; i++ {
		ok, n, r, err := allow(ctx, rdb, key, limit, window)
		if err != nil {
			return err
		}
		reset = r
		if ok {
			allowed++
			fmt.Fprintf(stdout, "request %d: allowed (%d/%d in this window)\n", i, n, limit)
		} else {
			limited++
			fmt.Fprintf(stdout, "request %d: limited (429, Retry-After %v)\n", i, r)
		}
	}
	if allowed != limit || limited != 3 {
		return fmt.Errorf("%d allowed and %d limited, want %d and 3", allowed, limited, limit)
	}

	// The window expires on the server; the next request starts a new one.
	// (PTTL counts whole milliseconds: wait one more to be past it.)
	reset += time.Millisecond
	if err := clock.Real().Sleep(ctx, reset); err != nil {
		return err
	}
	ok, n, _, err := allow(ctx, rdb, key, limit, window)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "after waiting %v: allowed=%t (%d/%d in the new window)\n", reset, ok, n, limit)
	if !ok || n != 1 {
		return fmt.Errorf("the window did not reset: count %d", n)
	}
	return nil
}
