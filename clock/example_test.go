package clock_test

import (
	"context"
	"fmt"
	"time"

	"github.com/fencedlock/fencedlock/clock"
)

// A test drives code that waits on a clock: it waits until the code has armed
// its timer, then moves the fake time. Nothing sleeps.
func ExampleNewFake() {
	f := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	done := make(chan error)
	go func() { done <- f.Sleep(context.Background(), 10*time.Second) }()

	_ = f.BlockUntilContext(context.Background(), 1) // the sleeper's timer is armed
	f.Advance(10 * time.Second)
	fmt.Println(<-done, f.Now().Format(time.TimeOnly))
	// Output: <nil> 00:00:10
}

// A skewed clock models a client whose clock is 30s ahead and runs twice as
// fast as the clock it is built on.
func ExampleNewSkewed() {
	f := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := clock.NewSkewed(f, 30*time.Second, 2)
	fmt.Println(s.Now().Format(time.TimeOnly))
	f.Advance(time.Minute)
	fmt.Println(s.Now().Format(time.TimeOnly))
	// Output:
	// 00:00:30
	// 00:02:30
}
