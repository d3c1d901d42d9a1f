package chaos

import (
	"context"
	"slices"
	"time"

	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/hook"
	"github.com/fencedlock/fencedlock/chaos/recorder"
	"github.com/fencedlock/fencedlock/chaos/schedule"
)

// healLoss runs the plan's drop-heal and delay-heal windows that cfg asks
// for (see hook.HealLoss) on the clients' connections, and records each
// fault per node and window, from the first heal taken to the last lost or
// sent.
type healLoss struct {
	rec  *recorder.Recorder
	loss *hook.HealLoss
}

func newHealLoss(ctx context.Context, cfg Config, plan schedule.Plan, rec *recorder.Recorder) *healLoss {
	windows := slices.DeleteFunc(slices.Clone(plan.Windows), func(w schedule.Window) bool { return !cfg.has(w.Kind) })
	return &healLoss{rec: rec, loss: hook.NewHealLoss(ctx, windows, cfg.NodeTimeout)}
}

// watch adds the hook to client c's connection to each node, if any window
// is planned.
func (l *healLoss) watch(c *client) {
	for i, rdb := range c.rdbs {
		if h := l.loss.Hook(i); h != nil {
			rdb.AddHook(h)
		}
	}
}

// record adds the faults to the history: call it once the clients stopped
// and the run's ctx ended.
func (l *healLoss) record() {
	l.loss.Spans(func(kind fault.Kind, node int, start, end time.Time) {
		l.rec.NodeFaultAt(kind, node, start, end, nil)
	})
}
