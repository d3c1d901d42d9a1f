package hook_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/hook"
	"github.com/fencedlock/fencedlock/chaos/schedule"
	"github.com/fencedlock/fencedlock/internal/redistest"
	"github.com/fencedlock/fencedlock/redlock"
)

// healScript raises a fence counter to ARGV[1], as a heal does: a script
// whose one key is a fence key.
var healScript = redis.NewScript(`return redis.call('SET', KEYS[1], ARGV[1])`)

// TestHealLoss: during a drop-heal window a heal fails with ErrHealLost and
// never reaches the node, while other commands pass; during a delay-heal
// window it returns at once and lands once the window has closed; each
// window is reported on the node it hit.
func TestHealLoss(t *testing.T) {
	fence := redlock.FenceKey("heal:key")
	for _, tc := range []struct {
		kind fault.Kind
		send func(ctx context.Context, c *redis.Client) error
	}{
		{fault.DropHeal, func(ctx context.Context, c *redis.Client) error {
			return healScript.Eval(ctx, c, []string{fence}, 7).Err()
		}},
		{fault.DelayHeal, func(ctx context.Context, c *redis.Client) error {
			return healScript.Eval(ctx, c, []string{fence}, 7).Err()
		}},
		{fault.DelayHeal, func(ctx context.Context, c *redis.Client) error { // in a pipeline, as redlock sends
			_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
				healScript.Eval(ctx, p, []string{fence}, 7)
				return nil
			})
			return err
		}},
	} {
		t.Run(string(tc.kind), func(t *testing.T) {
			ctx := t.Context()
			admin := redistest.Client(t, redistest.Start(t))
			hooked := redis.NewClient(&redis.Options{Addr: admin.Options().Addr, MaxRetries: -1})
			t.Cleanup(func() { _ = hooked.Close() })
			const window = 300 * time.Millisecond
			loss := hook.NewHealLoss(ctx, []schedule.Window{
				{At: 0, For: window, Kind: tc.kind},
				{At: 0, For: time.Hour, Kind: fault.Partition}, // not a heal window: left out
			}, time.Second)
			hooked.AddHook(loss.Hook(1))

			err := tc.send(ctx, hooked)
			if tc.kind == fault.DropHeal && !errors.Is(err, hook.ErrHealLost) {
				t.Fatalf("heal in a drop window: %v, want ErrHealLost", err)
			}
			if tc.kind == fault.DelayHeal && err != nil {
				t.Fatalf("heal in a delay window: %v, want an answer at once", err)
			}
			if err := hooked.Set(ctx, "other", "x", 0).Err(); err != nil {
				t.Fatalf("a command that is not a heal: %v", err)
			}
			if v, _ := admin.Get(ctx, fence).Result(); v != "" {
				t.Fatalf("the heal reached the node during its window: counter %q", v)
			}
			var spans []fault.Kind
			loss.Spans(func(kind fault.Kind, node int, start, end time.Time) {
				if node != 1 || end.Before(start) {
					t.Errorf("span of %s on node %d from %v to %v", kind, node, start, end)
				}
				spans = append(spans, kind)
			})
			if len(spans) != 1 || spans[0] != tc.kind {
				t.Fatalf("spans %v, want one %s", spans, tc.kind)
			}
			// Spans waited for the held heal: it has landed.
			want := ""
			if tc.kind == fault.DelayHeal {
				want = "7"
			}
			if v, _ := admin.Get(ctx, fence).Result(); v != want {
				t.Fatalf("after the window the counter is %q, want %q", v, want)
			}
		})
	}
}
