package hook

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/schedule"
	"github.com/fencedlock/fencedlock/redlock"
)

// HealLoss is the nemesis of the heals clients send to fence counters (a
// script whose one key is a fence key; see redlock.FenceKey). During its
// fault.DropHeal windows every heal is lost before it reaches the node, as
// a message the network drops; during its fault.DelayHeal windows every heal
// is held back until the window closes and then sent, as a message stuck in
// a slow network (the client's call returns at once, as if answered). A
// heal is best effort: the token's order rests on the raise alone, which
// checks ownership and is never touched. A lock that takes its token from a
// minority of counters and leaves the rest to the heal hands a smaller token
// out once the clients see another majority; a heal that lowers a counter,
// when it lands late, does too; a correct lock notices neither. It is a
// message fake on the client's side, since no proxy can pick one message
// out. A HealLoss is safe for concurrent use.
type HealLoss struct {
	windows []schedule.Window
	origin  time.Time       // the plan's time zero
	ctx     context.Context // the run's: held heals still waiting when it ends are lost
	timeout time.Duration   // bounds the held heal's call

	held sync.WaitGroup // held heals waiting or being sent

	mu    sync.Mutex              // protects spans
	spans map[[2]int][2]time.Time // (window, node) -> first heal taken, last lost or sent
}

// ErrHealLost is the error of a heal that a drop-heal window lost.
var ErrHealLost = errors.New("hook: heal lost (drop-heal)")

// NewHealLoss returns the nemesis of windows' drop-heal and delay-heal
// windows (the others are left out), timed from now, the plan's time zero.
// A held heal is sent within timeout, under ctx: when ctx ends, the heals
// still held are lost.
func NewHealLoss(ctx context.Context, windows []schedule.Window, timeout time.Duration) *HealLoss {
	l := &HealLoss{origin: time.Now(), ctx: ctx, timeout: timeout, spans: make(map[[2]int][2]time.Time)}
	for _, w := range windows {
		if w.Kind == fault.DropHeal || w.Kind == fault.DelayHeal {
			l.windows = append(l.windows, w)
		}
	}
	return l
}

// Hook returns the go-redis hook for a client's connection to node, or nil
// when no window is planned.
func (l *HealLoss) Hook(node int) redis.Hook {
	if len(l.windows) == 0 {
		return nil
	}
	return healHook{l: l, node: node}
}

// take returns what becomes of cmd, sent to node now: "" when it passes,
// fault.DropHeal when it is a heal to lose (its error is set), and
// fault.DelayHeal when it is a heal to hold back (see hold); and the index
// of the window.
func (l *HealLoss) take(node int, cmd redis.Cmder) (fault.Kind, int) {
	if !isHeal(cmd) {
		return "", -1
	}
	at := time.Since(l.origin)
	for i, w := range l.windows {
		if at >= w.At && at < w.At+w.For {
			l.note(i, node)
			if w.Kind == fault.DropHeal {
				cmd.SetErr(ErrHealLost)
			}
			return w.Kind, i
		}
	}
	return "", -1
}

// note extends the span of window i on node to now.
func (l *HealLoss) note(i, node int) {
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
func (l *HealLoss) hold(i, node int, cmd redis.Cmder, send func(context.Context, redis.Cmder)) {
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

// Spans waits for the heals still held back (they are sent, or lost when
// the run's ctx ended), then gives, per window and node, the fault as it
// happened: its kind, from the first heal taken to the last lost or sent.
// Call it once the clients stopped.
func (l *HealLoss) Spans(record func(kind fault.Kind, node int, start, end time.Time)) {
	l.held.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, span := range l.spans {
		record(l.windows[k[0]].Kind, k[1], span[0], span[1])
	}
}

// isHeal matches the scripts redlock sends to a fence counter alone.
func isHeal(cmd redis.Cmder) bool {
	args := cmd.Args()
	if !IsScript(cmd) || len(args) < 4 {
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

// healHook is HealLoss's go-redis hook on one node's connection.
type healHook struct {
	l    *HealLoss
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
			return ErrHealLost
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
			return ErrHealLost
		}
		return nil
	}
}
