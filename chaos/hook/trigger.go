package hook

import (
	"context"
	"net"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// Trigger is a go-redis hook that calls a function when a command matching a
// predicate is about to be sent (or, with AfterReply, once its reply is in),
// at most a set number of times: "kill node 2 when this client sends its
// first acquire script". Add it to a client with AddHook. The function runs
// synchronously in the goroutine that sends the command, which waits for it;
// it gets the command's ctx. A pipeline counts once, if any of its commands
// matches. A Trigger is safe for concurrent use.
type Trigger struct {
	match func(redis.Cmder) bool
	fire  func(ctx context.Context, cmd redis.Cmder)
	times int64
	after bool
	fired atomic.Int64
}

var _ redis.Hook = (*Trigger)(nil)

// TriggerOption configures NewTrigger.
type TriggerOption func(*Trigger)

// Times sets how many times the trigger fires at most. Default 1.
func Times(n int) TriggerOption { return func(t *Trigger) { t.times = int64(n) } }

// AfterReply fires once the matching command's reply (or error) is in,
// rather than before it is sent: "kill the node right after it granted".
func AfterReply() TriggerOption { return func(t *Trigger) { t.after = true } }

// NewTrigger returns a hook that calls fire for commands that match. A nil
// match matches scripts (IsScript).
func NewTrigger(match func(redis.Cmder) bool, fire func(ctx context.Context, cmd redis.Cmder), opts ...TriggerOption) *Trigger {
	if match == nil {
		match = IsScript
	}
	t := &Trigger{match: match, fire: fire, times: 1}
	for _, o := range opts {
		o(t)
	}
	return t
}

// IsScript matches the commands that run a Lua script or function: EVAL,
// EVALSHA (what redis.Script sends, falling back to EVAL), their _RO forms,
// and FCALL.
func IsScript(cmd redis.Cmder) bool {
	switch strings.ToLower(cmd.Name()) {
	case "eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro":
		return true
	}
	return false
}

// Fired returns how many times the trigger has fired.
func (t *Trigger) Fired() int { return int(min(t.fired.Load(), t.times)) }

// claim reports whether this match may fire: at most times claims succeed.
func (t *Trigger) claim() bool { return t.fired.Add(1) <= t.times }

// DialHook implements redis.Hook: dials pass through.
func (t *Trigger) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return next(ctx, network, addr)
	}
}

// ProcessHook implements redis.Hook.
func (t *Trigger) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !t.match(cmd) || !t.claim() {
			return next(ctx, cmd)
		}
		if !t.after {
			t.fire(ctx, cmd)
			return next(ctx, cmd)
		}
		err := next(ctx, cmd)
		t.fire(ctx, cmd)
		return err
	}
}

// ProcessPipelineHook implements redis.Hook; fire gets the first matching
// command.
func (t *Trigger) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		var hit redis.Cmder
		for _, c := range cmds {
			if t.match(c) {
				hit = c
				break
			}
		}
		if hit == nil || !t.claim() {
			return next(ctx, cmds)
		}
		if !t.after {
			t.fire(ctx, hit)
			return next(ctx, cmds)
		}
		err := next(ctx, cmds)
		t.fire(ctx, hit)
		return err
	}
}
