package checker_test

import (
	"fmt"
	"time"

	"github.com/fencedlock/fencedlock/chaos/checker"
	"github.com/fencedlock/fencedlock/chaos/recorder"
	"github.com/fencedlock/fencedlock/clock"
)

// A workload records each call just before and just after making it (with
// package recorder, into memory); at the end it records the store's
// contents and checks the history.
func ExampleCheck() {
	clk := clock.NewFake(time.Unix(0, 0)) // a real run leaves out WithClock
	mem := recorder.NewMemory()
	rec := recorder.New(mem, recorder.WithClock(clk), recorder.WithNodes(3))
	var store []string
	for i := range 3 {
		a := rec.Client(fmt.Sprint("client-", i)).Acquire("orders")
		clk.Advance(time.Millisecond) // Lock(ctx, "orders", ttl) runs here
		h := a.OK(uint64(i+1), clk.Now().Add(100*time.Millisecond))

		entry := fmt.Sprint("entry-", i)
		w := h.Write("orders-table", entry)
		store = append(store, entry) // the fenced store admits the token
		w.Accepted()

		r := h.Release()
		clk.Advance(time.Millisecond) // Unlock(ctx) runs here
		r.OK()
	}
	rec.Store("orders-table", store)

	res := checker.Check(mem.History(), checker.CheckOptions{})
	fmt.Println(res.Verdict, res.Acquisitions, res.Found.Total(), res.StoreCorrect)
	// Output: ok 3 0 true
}
