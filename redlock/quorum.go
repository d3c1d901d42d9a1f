package redlock

import (
	"context"
	"time"
)

type vote struct {
	ok  bool
	err error
}

// fanout runs call on each of the given nodes in parallel, each under its own
// timeout, and returns as soon as need of them said ok or that became
// impossible, or ctx ended. Calls still on the wire then finish in the
// background (tracked by Close). Node calls are not cancelled with ctx when
// detach is set: an Unlock must reach the nodes even if its caller gave up.
func (c *Client) fanout(ctx context.Context, nodes []int, need int, timeout time.Duration, detach bool,
	call func(ctx context.Context, i int) (bool, error)) (oks int, errs []error, ctxErr error) {
	base := ctx
	if detach {
		base = context.WithoutCancel(ctx)
	}
	votes := make(chan vote, len(nodes))
	c.bg.Add(len(nodes))
	for _, i := range nodes {
		go func() {
			defer c.bg.Done()
			nctx, cancel := context.WithTimeout(base, timeout)
			ok, err := call(nctx, i)
			cancel()
			if err != nil {
				err = c.nodeErr(i, err)
			}
			votes <- vote{ok: ok, err: err}
		}()
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
