package recorder_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/chaos/recorder"
	"github.com/fencedlock/fencedlock/fencing"
	"github.com/fencedlock/fencedlock/redlock"
)

// invoiceStore is the README's fenced store.
type invoiceStore interface {
	Save(ctx context.Context, token uint64, invoice []byte) error
}

// recordInvoice holds the README's example of package recorder, compiled
// (never run: it would write a file); TestREADMERecorderExample checks that
// the README shows the lines between the markers.
func recordInvoice(ctx context.Context, nodes []redis.UniversalClient, locker *redlock.Client, store invoiceStore,
	workerName, requestID string, invoice []byte) error {
	// README begins
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
	// README ends
	return nil
}

var _ = recordInvoice

// TestREADMERecorderExample checks that the README's Go block on package
// recorder is recordInvoice's, which compiles.
func TestREADMERecorderExample(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(readme), "package `chaos/recorder` writes it around your own lock calls:\n\n```go\n")
	block, _, closed := strings.Cut(after, "```\n")
	if !ok || !closed {
		t.Fatal("README: no Go block after the sentence on package chaos/recorder")
	}
	src, err := os.ReadFile("readme_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ := strings.Cut(string(src), "\t// README begins\n")
	body, _, _ = strings.Cut(body, "\t// README ends\n")
	var want strings.Builder
	for line := range strings.Lines(body) {
		want.WriteString(strings.TrimPrefix(line, "\t"))
	}
	if block != want.String() {
		t.Errorf("README block:\n%s\nwant (recordInvoice):\n%s", block, want.String())
	}
}
