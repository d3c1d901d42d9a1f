package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/internal/doctor"
)

// What `run` and `status` take from `doctor`: a node that does not answer
// is named on stderr even when the lock does not need it, and a set of
// fewer than three nodes, in which no node may fail, draws a warning.

// warnTolerance prints a one-line warning when n nodes tolerate no failure.
func warnTolerance(stderr io.Writer, cmd string, n int) {
	if w := doctor.Tolerance(n); w != "" {
		fmt.Fprintf(stderr, "fencedlock %s: warning: %s\n", cmd, w)
	}
}

// probeNodes PINGs every node at once, each within timeout, and sends the
// unreachable ones on the channel it returns, as "node ADDR: unreachable:
// why", in the order of clients.
func probeNodes(ctx context.Context, clients []*redis.Client, timeout time.Duration) <-chan []string {
	out := make(chan []string, 1)
	go func() {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		errs := make([]error, len(clients))
		var wg sync.WaitGroup
		for i, rdb := range clients {
			wg.Go(func() { errs[i] = doctor.Reach(ctx, rdb) })
		}
		wg.Wait()
		var lines []string
		for i, err := range errs {
			if doctor.Unreachable(err) {
				lines = append(lines, unreachableLine(clients[i].Options().Addr, err))
			}
		}
		out <- lines
	}()
	return out
}

func unreachableLine(addr string, err error) string {
	return fmt.Sprintf("node %s: unreachable: %s", addr, doctor.Why(err))
}

// reportProbe prints the probe's findings on stderr when it ends, without
// holding up the caller; the function it returns waits for that.
func reportProbe(probe <-chan []string, cmd string, stderr io.Writer) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, line := range <-probe {
			fmt.Fprintf(stderr, "fencedlock %s: warning: %s\n", cmd, line)
		}
	}()
	return func() { <-done }
}
