package redlock

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/internal/redistest"
)

// A grant that answers after its call timed out (late) is stepped back
// only once its attempt has failed or its hold was unlocked. While the
// attempt decides it is the failed call it was counted as: fail steps back
// every failed node, and an Unlock releases it. A step back sent while
// deciding would carry the hold's own value if the attempt won; sent
// again after a failure, it could delete a key an extension of the hold
// had counted (docs/protocol.md, section 4, the model's trace).
func TestLateGrantIsSteppedBackOnlyOnceTheAttemptEnded(t *testing.T) {
	procs := redistest.StartN(t, 3)
	nodes := make([]redis.UniversalClient, len(procs))
	for i, p := range procs {
		nodes[i] = redistest.Client(t, p)
	}
	c, err := New(nodes, WithNodeTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	for _, tc := range []struct {
		state attemptState
		kept  bool
	}{
		{undecided, true},
		{acquired, true},
		{abandoned, false},
		{unlocked, false},
	} {
		t.Run(map[attemptState]string{undecided: "deciding", acquired: "acquired", abandoned: "failed", unlocked: "unlocked"}[tc.state], func(t *testing.T) {
			key := "late-" + t.Name()
			a := c.startAttempt(key, time.Minute, time.Now(), 0, 0, nil)
			<-waitAnswers(t, a)
			a.mu.Lock()
			a.state = tc.state // what late reads; the answers in are settled already
			a.mu.Unlock()
			a.late(2, []any{int64(1), "1"})
			// A call behind whatever late sent, on node 2's queue for the
			// key (an extend of another value: it changes nothing): once it
			// answered, a step back sent by late has landed.
			if _, err := c.call(2, extendScript, time.Second, a.lockKey(), "barrier", int64(1000)); err != nil {
				t.Fatal(err)
			}
			v, err := nodes[2].Get(t.Context(), key).Result()
			if err != nil && err != redis.Nil {
				t.Fatal(err)
			}
			if held := v == a.value; held != tc.kept {
				t.Errorf("node 2 holds the late grant: %v, want %v", held, tc.kept)
			}
		})
	}
}

// waitAnswers closes the returned channel once every node answered a.
func waitAnswers(t *testing.T, a *attempt) <-chan struct{} {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			a.mu.Lock()
			all := true
			for _, ok := range a.answered {
				all = all && ok
			}
			a.mu.Unlock()
			if all {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	return done
}
