package recorder_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/fencedlock/fencedlock/chaos/checker"
	"github.com/fencedlock/fencedlock/chaos/history"
	"github.com/fencedlock/fencedlock/chaos/recorder"
	"github.com/fencedlock/fencedlock/clock"
	"github.com/fencedlock/fencedlock/fencing"
)

// Record each lock call just before it is made and its outcome just after,
// then check the history — here in the program; from a file, with
// `fencedlock check FILE`. The lock calls are comments, to keep the example
// free of servers; the fake clock stands in for the time they take.
func Example() {
	ctx := context.Background()
	var file bytes.Buffer                             // in a real program: a file per process
	clk := clock.NewFake(time.Unix(1_700_000_000, 0)) // in a real program: leave out WithClock
	rec := recorder.New(recorder.NewJSONL(&file), recorder.WithClock(clk), recorder.WithNodes(5))
	guard := fencing.NewMemory()
	var stored []string

	var token uint64
	for i, name := range []string{"worker-a", "worker-b", "worker-a"} {
		a := rec.Client(name).Acquire("invoice-42")
		clk.Advance(2 * time.Millisecond) // l, err := locker.Lock(ctx, "invoice-42", time.Second)
		token++
		h := a.OK(token, clk.Now().Add(time.Second)) // a.OK(l.Token(), l.Until()), or a.Fail(err)

		entry := fmt.Sprint("payment-", i)
		w := h.Write("invoices", entry)
		switch err := guard.Admit(ctx, "invoices", h.Token()); {
		case errors.Is(err, fencing.ErrStaleToken):
			w.Rejected()
		case err != nil:
			w.Fail(err)
		default:
			stored = append(stored, entry)
			w.Accepted()
		}

		r := h.Release()
		clk.Advance(time.Millisecond) // err := l.Unlock(ctx)
		r.OK()                        // or r.LockLost(), r.Fail(err)
	}
	rec.Store("invoices", stored)
	if err := rec.Close(); err != nil {
		log.Fatal(err)
	}

	lines := bufio.NewScanner(bytes.NewReader(file.Bytes()))
	for range 2 {
		lines.Scan()
		fmt.Println(lines.Text())
	}
	h, err := history.ReadJSONL(&file)
	if err != nil {
		log.Fatal(err)
	}
	res := checker.Check(h, checker.CheckOptions{})
	fmt.Println(res.Verdict, res.Acquisitions, res.Writes, h.Clients)
	// Output:
	// {"kind":"run","version":2,"nodes":5}
	// {"kind":"acquire","client":"worker-a","key":"invoice-42","invoke_ns":1700000000000000000,"complete_ns":1700000000002000000,"outcome":"ok","token":1,"valid_until_ns":1700000001002000000}
	// ok 3 3 [worker-a worker-b]
}
