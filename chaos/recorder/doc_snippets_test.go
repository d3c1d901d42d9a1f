package recorder_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/chaos/recorder"
	"github.com/fencedlock/fencedlock/fencing"
	"github.com/fencedlock/fencedlock/redlock"
)

// invoiceStore is the fenced store of docs/check.md.
type invoiceStore interface {
	Save(ctx context.Context, token uint64, invoice []byte) error
}

// recordInvoice holds the example of package recorder in docs/check.md,
// compiled (never run: it would write a file); internal/doccheck checks that
// the page shows the lines between the markers.
func recordInvoice(ctx context.Context, nodes []redis.UniversalClient, locker *redlock.Client, store invoiceStore,
	workerName, requestID string, invoice []byte) error {
	// doc block: docs/check.md
	f, _ := os.Create(fmt.Sprintf("history-%d.jsonl", os.Getpid()))
	rec := recorder.New(recorder.NewJSONL(f), recorder.WithNodes(len(nodes)))
	defer rec.Close() // writes the calls still in flight as never completed
	worker := rec.Client(workerName)

	a := worker.Acquire("invoice-42")
	l, err := locker.Lock(ctx, "invoice-42", 10*time.Second)
	if err != nil {
		a.Fail(err)
		return err
	}
	h := a.OK(l.Token(), l.Until())

	w := h.Write("invoices", requestID) // a fenced write, under the hold's token
	switch err := store.Save(ctx, l.Token(), invoice); {
	case errors.Is(err, fencing.ErrStaleToken):
		w.Rejected()
	case err != nil:
		w.Fail(err)
	default:
		w.Accepted()
	}

	r := h.Release()
	switch err := l.Unlock(ctx); {
	case err == nil:
		r.OK()
	case errors.Is(err, redlock.ErrLockLost):
		r.LockLost()
	default:
		r.Fail(err)
	}
	// end doc block
	return nil
}

var _ = recordInvoice
