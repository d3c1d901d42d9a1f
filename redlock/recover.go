package redlock

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
)

// goNode runs f in the background for node i, tracked by Close. A panic in f
// (a redis client can panic, e.g. a go-redis Ring subscribed to no channel)
// does not escape: it is logged with its stack and counted as an error of
// node i, and what f was doing for that node stops. For pub/sub, waiters
// then fall back to their backoff.
func (c *Client) goNode(i int, f func()) {
	c.goBackground(func() {
		defer c.recoverNode(i)
		f()
	})
}

// recoverNode is deferred by goNode.
func (c *Client) recoverNode(i int) {
	p := recover()
	if p == nil {
		return
	}
	c.cfg.logger.LogAttrs(context.Background(), slog.LevelError, "redlock: recovered a panic in a background goroutine",
		slog.Int("node", i), slog.String("addr", c.nodes[i].addr), slog.Any("panic", p),
		slog.String("stack", string(debug.Stack())))
	c.nodeErr(i, fmt.Errorf("redlock: recovered panic: %v", p))
}
