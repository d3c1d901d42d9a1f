package history_test

import (
	"fmt"
	"time"

	"github.com/fencedlock/fencedlock/chaos/history"
	"github.com/fencedlock/fencedlock/clock"
)

// A workload records each call just before and just after making it; at the
// end it records the store's contents and checks the history.
func ExampleRecorder() {
	clk := clock.NewFake(time.Unix(0, 0)) // a real run passes clock.Real()
	rec := history.NewRecorder(clk, 3)
	var store []string
	for client := range 3 {
		a := rec.Acquire(client, "orders")
		clk.Advance(time.Millisecond) // Lock(ctx, "orders", ttl) runs here
		h := a.OK(uint64(client+1), fmt.Sprint("value-", client), 100*time.Millisecond)

		entry := fmt.Sprint("entry-", client)
		w := rec.Write(h, "orders-table", entry)
		store = append(store, entry) // the fenced store admits the token
		w.Accepted(uint64(len(store)))

		r := rec.Release(h)
		clk.Advance(time.Millisecond) // Unlock(ctx) runs here
		r.OK()
	}
	rec.FinalStore("orders-table", store)

	res := history.Check(rec.History(), history.CheckOptions{})
	fmt.Println(res.Verdict, res.Acquisitions, res.Found.Total(), res.StoreCorrect)
	// Output: ok 3 0 true
}
