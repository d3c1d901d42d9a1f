package hook_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/chaos/backend/backendtest"
	"github.com/fencedlock/fencedlock/chaos/backend/process/processtest"
	"github.com/fencedlock/fencedlock/chaos/hook"
	"github.com/fencedlock/fencedlock/internal/redistest"
)

// names records the names of the commands a trigger fired for.
type names struct {
	mu  sync.Mutex // protects got
	got []string
}

func (n *names) fire(_ context.Context, cmd redis.Cmder) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.got = append(n.got, cmd.Name())
}

func (n *names) list() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.got)
}

func TestTriggerFiresOnScripts(t *testing.T) {
	c := redistest.Client(t, redistest.Start(t))
	ctx := t.Context()
	var n names
	tr := hook.NewTrigger(nil, n.fire, hook.Times(2))
	c.AddHook(tr)

	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Eval(ctx, "return 1", nil).Err(); err != nil {
		t.Fatal(err)
	}
	// redis.Script sends EVALSHA, then EVAL when the script is not loaded.
	if err := redis.NewScript("return 2").Run(ctx, c, nil).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Eval(ctx, "return 3", nil).Err(); err != nil {
		t.Fatal(err)
	}
	if got, want := n.list(), []string{"eval", "evalsha"}; !slices.Equal(got, want) {
		t.Fatalf("fired for %q, want %q (and at most twice)", got, want)
	}
	if tr.Fired() != 2 {
		t.Fatalf("Fired() = %d, want 2", tr.Fired())
	}
}

func TestTriggerPipelines(t *testing.T) {
	c := redistest.Client(t, redistest.Start(t))
	ctx := t.Context()
	var n names
	c.AddHook(hook.NewTrigger(nil, n.fire, hook.Times(10)))

	if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "a", "1", 0)
		p.Get(ctx, "a")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "b", "1", 0)
		p.Eval(ctx, "return 1", nil)
		p.Eval(ctx, "return 2", nil)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got, want := n.list(), []string{"eval"}; !slices.Equal(got, want) {
		t.Fatalf("fired for %q, want once for the pipeline with scripts", got)
	}
}

func TestTriggerCustomMatch(t *testing.T) {
	c := redistest.Client(t, redistest.Start(t))
	var n names
	c.AddHook(hook.NewTrigger(func(cmd redis.Cmder) bool { return cmd.Name() == "incr" }, n.fire, hook.Times(3)))
	for range 5 {
		if err := c.Incr(t.Context(), "n").Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.Eval(t.Context(), "return 1", nil).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if got := n.list(); len(got) != 3 {
		t.Fatalf("fired %d times (%q), want 3", len(got), got)
	}
}

// TestTriggerKillsDuringAcquire is the "kill during acquire" case: the
// trigger kills the node a script is about to reach (it fails), or the node
// that has just answered it (it succeeded, the node is gone).
func TestTriggerKillsDuringAcquire(t *testing.T) {
	for _, tc := range []struct {
		name       string
		opts       []hook.TriggerOption
		scriptFail bool
	}{
		{"before send", nil, true},
		{"after reply", []hook.TriggerOption{hook.AfterReply()}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := processtest.New(t, 1)
			ctx := t.Context()
			c := backendtest.NewClient(t, b.Nodes()[0].Addr())
			acquire := redis.NewScript(`return redis.call("SET", KEYS[1], ARGV[1], "NX", "PX", ARGV[2])`)
			if err := acquire.Load(ctx, c).Err(); err != nil { // so EVALSHA succeeds when it gets through
				t.Fatal(err)
			}
			var killErr error
			tr := hook.NewTrigger(nil, func(ctx context.Context, _ redis.Cmder) {
				killErr = b.Kill(context.WithoutCancel(ctx), 0)
			}, tc.opts...)
			c.AddHook(tr)

			err := acquire.Run(ctx, c, []string{"lock"}, "me", 1000).Err()
			if killErr != nil {
				t.Fatal(killErr)
			}
			if tr.Fired() != 1 {
				t.Fatalf("Fired() = %d, want 1", tr.Fired())
			}
			if (err != nil) != tc.scriptFail {
				t.Fatalf("script error %v, want failure %v", err, tc.scriptFail)
			}
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			if err := c.Ping(pctx).Err(); err == nil {
				t.Fatal("node still answers after the trigger killed it")
			}
		})
	}
}

func TestIsScript(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		cmd  redis.Cmder
		want bool
	}{
		{redis.NewCmd(ctx, "EVAL", "return 1", 0), true},
		{redis.NewCmd(ctx, "evalsha", "abc", 0), true},
		{redis.NewCmd(ctx, "EVALSHA_RO", "abc", 0), true},
		{redis.NewCmd(ctx, "FCALL", "f", 0), true},
		{redis.NewCmd(ctx, "SET", "k", "v"), false},
		{redis.NewCmd(ctx, "SCRIPT", "LOAD", "return 1"), false},
	} {
		if got := hook.IsScript(tc.cmd); got != tc.want {
			t.Errorf("IsScript(%v) = %v, want %v", tc.cmd.Args(), got, tc.want)
		}
	}
}
