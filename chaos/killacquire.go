package chaos

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/chaos/backend"
	"github.com/fencedlock/fencedlock/chaos/fault"
)

// killDuringAcquire kills a node at the moment one of client c's acquire
// scripts is about to reach it — the acquisition is in flight on the other
// nodes — and starts it again (with its data) a while later. One node at a
// time; the node plan leaves room for it in the minority. Each fault, and
// each kill or start that failed, goes to faults.
func killDuringAcquire(ctx context.Context, cfg Config, b backend.Backend, plan backend.Plan, c *client, faults *faultLog) {
	type kill struct {
		at  time.Time
		err error
	}
	start := time.Now()
	armed := make([]atomic.Bool, cfg.Nodes)
	fired := make(chan kill, 1)
	for i, rdb := range c.rdbs {
		rdb.AddHook(backend.NewTrigger(
			func(cmd redis.Cmder) bool { return armed[i].Load() && backend.IsScript(cmd) },
			func(ctx context.Context, _ redis.Cmder) {
				if armed[i].CompareAndSwap(true, false) {
					t := time.Now()
					fired <- kill{t, b.Kill(context.WithoutCancel(ctx), i)}
				}
			},
			backend.Times(1<<30)))
	}
	r := rand.New(rand.NewPCG(cfg.Seed, 0x4b111))
	for ctx.Err() == nil {
		sleepReal(ctx, cfg.TTL/2+time.Duration(r.Int64N(int64(cfg.TTL))))
		// A node the plan leaves alone for as long as this fault can last.
		from := time.Since(start)
		node, ok := freeNode(plan, cfg.Nodes, from-time.Second, from+4*cfg.TTL, r)
		if !ok {
			continue
		}
		armed[node].Store(true)
		var k kill
		select {
		case k = <-fired:
		case <-ctx.Done():
			armed[node].Store(false)
			select { // it may have fired just now
			case k = <-fired:
			default:
				return
			}
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
func freeNode(plan backend.Plan, nodes int, from, to time.Duration, r *rand.Rand) (int, bool) {
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
