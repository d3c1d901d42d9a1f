package chaos

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/chaos/backend"
	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/history"
	"github.com/fencedlock/fencedlock/redlock"
)

// healLoss is the fault.DropHeal nemesis: during the plan's DropHeal
// windows, every heal a client sends to a fence counter (a script whose one
// key is a fence key; see redlock.FenceKey) is lost before it reaches the
// node, as a message the network drops. A heal is best effort: the token's
// order rests on the raise alone, which checks ownership and is never
// dropped. A lock that takes its token from a minority of counters and
// leaves the rest to the heal hands a smaller token out once the clients see
// another majority; a correct one does not notice. The fault is recorded per
// node and window, from the first heal lost to the last; it is a message
// fake on the client's side since no proxy can pick one message out.
type healLoss struct {
	rec     *history.Recorder
	windows []backend.Window
	origin  time.Time // the plan's time zero

	mu   sync.Mutex              // protects lost
	lost map[[2]int][2]time.Time // (window, node) -> first and last heal lost
}

var errHealLost = errors.New("chaos: heal lost (drop-heal)")

func newHealLoss(cfg Config, plan backend.Plan, rec *history.Recorder) *healLoss {
	l := &healLoss{rec: rec, origin: time.Now(), lost: make(map[[2]int][2]time.Time)}
	if cfg.has(fault.DropHeal) {
		for _, w := range plan.Windows {
			if w.Kind == fault.DropHeal {
				l.windows = append(l.windows, w)
			}
		}
	}
	return l
}

// watch adds the hook to client c's connection to each node, if any window
// is planned.
func (l *healLoss) watch(c *client) {
	if len(l.windows) == 0 {
		return
	}
	for i, rdb := range c.rdbs {
		rdb.AddHook(healHook{l: l, node: i})
	}
}

// drops reports whether cmd, sent to node now, is a heal to lose.
func (l *healLoss) drops(node int, cmd redis.Cmder) bool {
	if !isHeal(cmd) {
		return false
	}
	now := time.Now()
	at := now.Sub(l.origin)
	for i, w := range l.windows {
		if at >= w.At && at < w.At+w.For {
			l.mu.Lock()
			defer l.mu.Unlock()
			k := [2]int{i, node}
			span, seen := l.lost[k]
			if !seen {
				span[0] = now
			}
			span[1] = now
			l.lost[k] = span
			cmd.SetErr(errHealLost)
			return true
		}
	}
	return false
}

// record adds the faults to the history: call it once the clients stopped.
func (l *healLoss) record() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, span := range l.lost {
		l.rec.FaultAt(fault.DropHeal, k[1], span[0], span[1], nil)
	}
}

// isHeal matches the scripts redlock sends to a fence counter alone.
func isHeal(cmd redis.Cmder) bool {
	args := cmd.Args()
	if !backend.IsScript(cmd) || len(args) < 4 {
		return false
	}
	var keys int64
	switch n := args[2].(type) {
	case int:
		keys = int64(n)
	case int64:
		keys = n
	}
	key, _ := args[3].(string)
	return keys == 1 && key != "" && redlock.FenceKey(key) == key
}

// healHook is healLoss's go-redis hook on one node's connection.
type healHook struct {
	l    *healLoss
	node int
}

func (h healHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return next(ctx, network, addr)
	}
}

func (h healHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.l.drops(h.node, cmd) {
			return errHealLost
		}
		return next(ctx, cmd)
	}
}

func (h healHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		kept := cmds[:0:0]
		for _, cmd := range cmds {
			if !h.l.drops(h.node, cmd) {
				kept = append(kept, cmd)
			}
		}
		if len(kept) == 0 {
			return errHealLost
		}
		return next(ctx, kept)
	}
}
