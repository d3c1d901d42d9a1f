package redlocktest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/fencedlock/fencedlock/redlock"
	"github.com/fencedlock/fencedlock/redlocktest"
)

// A job that holds a lock while it works, and must stop the moment the lock
// is lost. The test kills two of three nodes while the job runs: the lock
// cannot be extended any more, its validity runs out, Done closes, and the
// job stops. In a test, nodes := redlocktest.Nodes(t, 3) starts the nodes
// and closes them at the end; New and Close are for code without a
// testing.TB, such as this Example.
func Example() {
	ctx := context.Background()
	nodes, err := redlocktest.New(ctx, 3)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer nodes.Close()

	locks, err := redlock.New(nodes.Clients())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locks.Close()

	// A short TTL: the loss shows within a second.
	l, err := locks.Lock(ctx, "nightly-report", time.Second, redlock.AutoExtend())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("job started")

	// A majority of the nodes dies while the job runs.
	for _, n := range nodes[:2] {
		if err := n.Kill(); err != nil {
			fmt.Println(err)
			return
		}
	}

	// The job: a step at a time, checking Done between the steps.
	work := time.NewTicker(10 * time.Millisecond)
	defer work.Stop()
	limit := time.NewTimer(time.Minute) // bounded: the Example must not hang
	defer limit.Stop()
	for {
		select {
		case <-l.Done():
			fmt.Println("lock lost: job stopped")
			// Releases what is left on the nodes still up; it reports the
			// nodes that failed.
			_ = l.Unlock(ctx)
			return
		case <-work.C: // one step of work, passing l.Token() with each write
		case <-limit.C:
			fmt.Println("the lock was never lost")
			return
		}
	}
	// Output:
	// job started
	// lock lost: job stopped
}
