package redlock

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

type vote struct {
	ok  bool
	err error
}

// fanout runs script on each of the given nodes, each call under timeout,
// and returns as soon as need of them answered 1 or that became impossible,
// or ctx ended. Calls still on the wire then finish in the background
// (tracked by Close); they are never cancelled with ctx, so an Unlock
// reaches the nodes even if its caller gave up.
func (c *Client) fanout(ctx context.Context, nodes []int, need int, timeout time.Duration,
	script *redis.Script, keys []string, args ...any) (oks int, errs []error, ctxErr error) {
	votes := make(chan vote, len(nodes))
	deadline := time.Now().Add(timeout)
	for _, i := range nodes {
		c.batchers[i].do(&op{script: script, keys: keys, args: args, deadline: deadline,
			done: func(v any, err error) {
				if err != nil {
					err = c.nodeErr(i, err)
				}
				votes <- vote{ok: err == nil && asInt(v) == 1, err: err}
			}})
	}
	fails := 0
	for range nodes {
		if oks >= need || fails > len(nodes)-need {
			return oks, errs, nil
		}
		select {
		case v := <-votes:
			switch {
			case v.ok:
				oks++
			case v.err != nil:
				errs = append(errs, v.err)
				fails++
			default:
				fails++
			}
		case <-ctx.Done():
			return oks, errs, ctx.Err()
		}
	}
	return oks, errs, nil
}

func allNodes(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}
