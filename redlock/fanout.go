package redlock

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// fanout runs script on each of the given nodes, each call under timeout,
// and returns as soon as need of them answered 1 or that became impossible,
// or ctx ended (ctxErr, unless the answers already in decide it); yes lists
// the nodes that answered 1 by then, refused counts those that answered 0. Calls still on the
// wire then finish in the background (tracked by Close); they are never
// cancelled with ctx, so an Unlock reaches the nodes even if its caller gave
// up.
func (c *Client) fanout(ctx context.Context, nodes []int, need int, timeout time.Duration,
	script *redis.Script, keys []string, args ...any) (yes []int, refused int, errs []error, ctxErr error) {
	votes := make(voteSink, len(nodes))
	c.newGroup(votes, timeout, nodes, script, keys, args...).start()
	return c.count(ctx, votes, len(nodes), need, 0)
}

// count collects a fan-out's votes from n nodes (see fanout). With lostAt >
// 0 it returns early only on need oks or lostAt refusals, else once every
// node answered: an outcome that must tell "refused" from "unknown".
func (c *Client) count(ctx context.Context, votes voteSink, n, need, lostAt int) (yes []int, refused int, errs []error, ctxErr error) {
	oks, fails := 0, 0
	tally := func(v vote) {
		switch {
		case v.ok:
			oks++
			yes = append(yes, v.node)
		case v.err != nil:
			errs = append(errs, c.nodeErr(v.node, v.err))
			fails++
		default:
			fails++
		}
	}
	decided := func() bool {
		if lostAt > 0 {
			return oks >= need || fails-len(errs) >= lostAt
		}
		return oks >= need || fails > n-need
	}
	for range n {
		if decided() {
			return yes, fails - len(errs), errs, nil
		}
		select {
		case v := <-votes:
			tally(v)
		case <-ctx.Done():
			// What the nodes said already counts: the outcome may be
			// known without waiting.
			for len(votes) > 0 && !decided() {
				tally(<-votes)
			}
			if decided() {
				return yes, fails - len(errs), errs, nil
			}
			return yes, fails - len(errs), errs, ctx.Err()
		}
	}
	return yes, fails - len(errs), errs, nil
}

type vote struct {
	node int
	ok   bool
	err  error
}

// voteSink collects a fan-out's answers: 1 is a yes.
type voteSink chan vote

func (s voteSink) answer(i int, v any, err error) {
	s <- vote{node: i, ok: err == nil && isYes(v), err: err}
}
func (voteSink) late(int, any) {}

// allNodes is 0..n-1: every node, for the calls that go to all of them.
func allNodes(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}
