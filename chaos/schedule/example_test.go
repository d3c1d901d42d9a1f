package schedule_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/chaos/backend"
	"github.com/fencedlock/fencedlock/chaos/backend/process"
	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/hook"
	"github.com/fencedlock/fencedlock/chaos/schedule"
)

// A chaos run on three local nodes: draw a plan from a seed, run it while a
// workload uses the nodes, and record each fault once it is over.
func Example() {
	ctx := context.Background()
	b, err := process.New(ctx, 3)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	// One client per node, at addresses that survive the faults.
	var clients []redis.UniversalClient
	for _, addr := range backend.Addrs(b) {
		c := redis.NewClient(&redis.Options{Addr: addr})
		defer c.Close()
		clients = append(clients, c)
	}
	_ = clients // ... start the workload on them ...

	kinds, err := fault.Parse("kill,pause,partition,latency")
	if err != nil {
		log.Fatal(err)
	}
	plan, err := schedule.NewPlan(len(b.Nodes()), 10*time.Second, kinds, 42)
	if err != nil {
		log.Fatal(err)
	}
	err = schedule.Run(ctx, b, plan, func(e schedule.FaultEvent) {
		fmt.Printf("%v for %v (err: %v)\n", e.Fault, e.End.Sub(e.Start).Round(time.Millisecond), e.Err)
	})
	if err != nil {
		log.Print(err)
	}
}

// The same seed always gives the same plan.
func ExampleNewPlan() {
	kinds := []fault.Kind{fault.Kill, fault.Partition, fault.Latency}
	plan, err := schedule.NewPlan(5, 4*time.Second, kinds, 7)
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range plan.Steps {
		fmt.Printf("at %v for %v: %v\n", s.At.Round(time.Millisecond), s.For.Round(time.Millisecond), s.Fault)
	}
	// Output:
	// at 418ms for 1.163s: partition node 2
	// at 987ms for 1.744s: latency 50ms on node 3
	// at 1.828s for 1.402s: partition node 0
	// at 2.866s for 982ms: kill node 3
	// at 3.852s for 148ms: partition node 4
}

// Kill node 2 the moment this client sends its first script (an acquire, in
// fencedlock's case) to node 0: the acquisition runs with a node dying under it.
func ExampleNewTrigger() {
	ctx := context.Background()
	b, err := process.New(ctx, 3)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	node0 := redis.NewClient(&redis.Options{Addr: b.Nodes()[0].Addr()})
	defer node0.Close()
	node0.AddHook(hook.NewTrigger(hook.IsScript, func(ctx context.Context, _ redis.Cmder) {
		if err := b.Kill(ctx, 2); err != nil {
			log.Print(err)
		}
	}))
	// ... acquire a lock on the clients of nodes 0, 1 and 2 ...
}
