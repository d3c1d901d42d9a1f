package chaos

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/chaos/backend"
	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/hook"
	"github.com/fencedlock/fencedlock/chaos/schedule"
)

// kill is a node kill that an acquire triggered: when, and how it went.
type kill struct {
	at  time.Time
	err error
}

// acquireTrigger kills a node at the moment one of a client's acquire
// scripts is about to reach it, once armed for that node.
type acquireTrigger interface {
	arm(node int)
	// disarm reports whether node was still armed; if not, the kill is
	// under way, and fired will deliver it.
	disarm(node int) bool
	fired() <-chan kill // one kill per arm that fired
}

// hookTrigger is an acquireTrigger on the node connections of an
// in-process client: a go-redis hook that kills the node before the script
// is sent on.
type hookTrigger struct {
	armed []atomic.Bool
	kills chan kill
}

func newHookTrigger(b backend.Backend, c *client) *hookTrigger {
	t := &hookTrigger{armed: make([]atomic.Bool, len(c.rdbs)), kills: make(chan kill, 1)}
	for i, rdb := range c.rdbs {
		rdb.AddHook(hook.NewTrigger(
			func(cmd redis.Cmder) bool { return t.armed[i].Load() && isLockCall(cmd) },
			func(ctx context.Context, _ redis.Cmder) {
				if t.armed[i].CompareAndSwap(true, false) {
					at := time.Now()
					t.kills <- kill{at, b.Kill(context.WithoutCancel(ctx), i)}
				}
			},
			hook.Times(1<<30)))
	}
	return t
}

// isLockCall matches what a lock sends a node: a script (fencedlock's,
// redislock's and the Sentinel lock's acquire, and every lock's release and
// extend) or a SET (redsync's acquire, SET NX PX).
func isLockCall(cmd redis.Cmder) bool {
	return hook.IsScript(cmd) || strings.EqualFold(cmd.Name(), "set")
}

func (t *hookTrigger) arm(node int)         { t.armed[node].Store(true) }
func (t *hookTrigger) disarm(node int) bool { return t.armed[node].CompareAndSwap(true, false) }
func (t *hookTrigger) fired() <-chan kill   { return t.kills }

// killDuringAcquire kills a node at the moment one of a client's acquire
// scripts is about to reach it, through trig — the acquisition is in flight
// on the other nodes — and starts it again (with its data) a while later.
// One node at a time; the node plan leaves room for it in the minority. Each
// fault, and each kill or start that failed, goes to faults.
func killDuringAcquire(ctx context.Context, cfg Config, b backend.Backend, plan schedule.Plan, trig acquireTrigger, faults *faultLog) {
	start := time.Now()
	r := rand.New(rand.NewPCG(cfg.Seed, 0x4b111))
	for ctx.Err() == nil {
		sleepReal(ctx, cfg.TTL/2+time.Duration(r.Int64N(int64(cfg.TTL))))
		// A node the plan leaves alone for as long as this fault can last.
		from := time.Since(start)
		node, ok := freeNode(plan, cfg.Nodes, from-time.Second, from+4*cfg.TTL, r)
		if !ok {
			continue
		}
		trig.arm(node)
		var k kill
		select {
		case k = <-trig.fired():
		case <-ctx.Done():
			if trig.disarm(node) {
				return
			}
			k = <-trig.fired() // it fired just now
		}
		if k.err != nil {
			faults.record(fault.KillDuringAcquire, node, k.at, time.Now(), k.err)
			continue
		}
		sleepReal(ctx, cfg.TTL/2+time.Duration(r.Int64N(int64(cfg.TTL))))
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		err := b.Start(sctx, node)
		cancel()
		faults.record(fault.KillDuringAcquire, node, k.at, time.Now(), err)
	}
}

// freeNode picks a node that no step of plan holds during [from, to].
func freeNode(plan schedule.Plan, nodes int, from, to time.Duration, r *rand.Rand) (int, bool) {
	busy := make([]bool, nodes)
	for _, s := range plan.Steps {
		if s.At <= to && s.At+s.For >= from && s.Node < nodes {
			busy[s.Node] = true
		}
	}
	var free []int
	for i, b := range busy {
		if !b {
			free = append(free, i)
		}
	}
	if len(free) == 0 {
		return 0, false
	}
	return free[r.IntN(len(free))], true
}
