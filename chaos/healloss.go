package chaos

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/hook"
	"github.com/fencedlock/fencedlock/chaos/recorder"
	"github.com/fencedlock/fencedlock/chaos/schedule"
	"github.com/fencedlock/fencedlock/redlock"
)

// healLoss is the nemesis of the heals clients send to fence counters (a
// script whose one key is a fence key; see redlock.FenceKey). During the
// plan's fault.DropHeal windows every heal is lost before it reaches the
// node, as a message the network drops; during its fault.DelayHeal windows
// every heal is held back until the window closes and then sent, as a
// message stuck in a slow network (the client's call returns at once, as if
// answered). A heal
// is best effort: the token's order rests on the raise alone, which checks
// ownership and is never touched. A lock that takes its token from a
// minority of counters and leaves the rest to the heal hands a smaller token
// out once the clients see another majority; a heal that lowers a counter,
// when it lands late, does too; a correct lock notices neither. The fault is
// recorded per node and window, from the first heal taken to the last lost
// or sent; it is a message fake on the client's side since no proxy can
// pick one message out.
type healLoss struct {
	rec     *recorder.Recorder
	windows []schedule.Window
	origin  time.Time       // the plan's time zero
	ctx     context.Context // the run's: held heals still waiting when it ends are lost
	timeout time.Duration   // bounds the held heal's call

	held sync.WaitGroup // held heals waiting or being sent

	mu    sync.Mutex              // protects spans
	spans map[[2]int][2]time.Time // (window, node) -> first heal taken, last lost or sent
}

var errHealLost = errors.New("chaos: heal lost (drop-heal)")

func newHealLoss(ctx context.Context, cfg Config, plan schedule.Plan, rec *recorder.Recorder) *healLoss {
	l := &healLoss{rec: rec, origin: time.Now(), ctx: ctx, timeout: cfg.NodeTimeout,
		spans: make(map[[2]int][2]time.Time)}
	for _, w := range plan.Windows {
		if (w.Kind == fault.DropHeal || w.Kind == fault.DelayHeal) && cfg.has(w.Kind) {
			l.windows = append(l.windows, w)
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

// take returns what becomes of cmd, sent to node now: "" when it passes,
// fault.DropHeal when it is a heal to lose (its error is set), and
// fault.DelayHeal when it is a heal to hold back (see hold); and the index
// of the window.
func (l *healLoss) take(node int, cmd redis.Cmder) (fault.Kind, int) {
	if !isHeal(cmd) {
		return "", -1
	}
	at := time.Since(l.origin)
	for i, w := range l.windows {
		if at >= w.At && at < w.At+w.For {
			l.note(i, node)
			if w.Kind == fault.DropHeal {
				cmd.SetErr(errHealLost)
			}
			return w.Kind, i
		}
	}
	return "", -1
}

// note extends the span of window i on node to now.
func (l *healLoss) note(i, node int) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	k := [2]int{i, node}
	span, seen := l.spans[k]
	if !seen {
		span[0] = now
	}
	if now.After(span[1]) {
		span[1] = now
	}
	l.spans[k] = span
}

// hold sends a copy of cmd, a heal of window i's to node, through send once
// the window has closed, unless the run ended first. (A heal that finds the
// script gone from a node restarted meanwhile is lost.)
func (l *healLoss) hold(i, node int, cmd redis.Cmder, send func(context.Context, redis.Cmder)) {
	heal := redis.NewCmd(l.ctx, cmd.Args()...)
	l.held.Go(func() {
		w := l.windows[i]
		t := time.NewTimer(time.Until(l.origin.Add(w.At + w.For)))
		defer t.Stop()
		select {
		case <-t.C:
		case <-l.ctx.Done():
			return
		}
		ctx, cancel := context.WithTimeout(l.ctx, l.timeout)
		defer cancel()
		send(ctx, heal)
		l.note(i, node)
	})
}

// record adds the faults to the history: call it once the clients stopped
// and the run's ctx ended.
func (l *healLoss) record() {
	l.held.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, span := range l.spans {
		l.rec.NodeFaultAt(l.windows[k[0]].Kind, k[1], span[0], span[1], nil)
	}
}

// isHeal matches the scripts redlock sends to a fence counter alone.
func isHeal(cmd redis.Cmder) bool {
	args := cmd.Args()
	if !hook.IsScript(cmd) || len(args) < 4 {
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

// A heal to hold that comes as an EVALSHA is answered NOSCRIPT, so that the
// client sends the script itself (go-redis and redlock fall back to EVAL):
// the held copy then runs even on a node that lost its script cache in the
// meantime. Only an EVAL is held.
var errNoScript = redis.ErrNoScript

func (h healHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		switch kind, w := h.l.take(h.node, cmd); kind {
		case fault.DropHeal:
			return errHealLost
		case fault.DelayHeal:
			if isEvalSha(cmd) {
				cmd.SetErr(errNoScript)
				return errNoScript
			}
			h.l.hold(w, h.node, cmd, func(ctx context.Context, c redis.Cmder) { _ = next(ctx, c) })
			return nil
		}
		return next(ctx, cmd)
	}
}

func isEvalSha(cmd redis.Cmder) bool { return strings.EqualFold(cmd.Name(), "evalsha") }

func (h healHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		kept := cmds[:0:0]
		var dropped bool
		for _, cmd := range cmds {
			switch kind, w := h.l.take(h.node, cmd); kind {
			case fault.DropHeal:
				dropped = true
			case fault.DelayHeal:
				if isEvalSha(cmd) {
					cmd.SetErr(errNoScript)
					continue
				}
				h.l.hold(w, h.node, cmd, func(ctx context.Context, c redis.Cmder) {
					_ = next(ctx, []redis.Cmder{c})
				})
			default:
				kept = append(kept, cmd)
			}
		}
		switch {
		case len(kept) > 0:
			return next(ctx, kept)
		case dropped:
			return errHealLost
		}
		return nil
	}
}
