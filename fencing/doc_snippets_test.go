package fencing_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/fencing"
	"github.com/fencedlock/fencedlock/redlock"
)

// The Go blocks of docs/fencing.md, compiled here (internal/doccheck checks
// that the page shows exactly the marked lines). The Example functions in
// example_test.go run each guard.

func memoryGuard(ctx context.Context, lock *redlock.Lock) error {
	// doc block: docs/fencing.md
	g := fencing.NewMemory()
	err := g.Append(ctx, "report.pdf", lock.Token(), "v2") // check + append, atomically
	var stale *fencing.StaleTokenError
	if errors.As(err, &stale) {
		log.Printf("stale: %d < %d", stale.Token, stale.Highest)
	}
	// end doc block
	return err
}

func redisGuard(ctx context.Context, rdb redis.UniversalClient, lock *redlock.Lock, body string) ([]fencing.Entry, error) {
	// doc block: docs/fencing.md
	g := fencing.NewRedis(rdb) // any redis.UniversalClient
	// The key shares the {resource} tag, so that one script checks and writes (Cluster too).
	if err := g.Set(ctx, "invoice-7", lock.Token(), "invoices:{invoice-7}", body); err != nil {
		return nil, err
	}
	if err := g.Append(ctx, "invoice-7", lock.Token(), "paid"); err != nil { // fenced append-only log
		return nil, err
	}
	entries, err := g.Log(ctx, "invoice-7")
	// end doc block
	return entries, err
}

func sqlGuard(ctx context.Context, db *sql.DB, lock *redlock.Lock) error {
	// doc block: docs/fencing.md
	g, err := fencing.NewSQL(db, fencing.Postgres) // or fencing.SQLite
	if err != nil {
		return err
	}
	if err := g.Init(ctx); err != nil { // CREATE TABLE IF NOT EXISTS fencing_tokens
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := g.AdmitTx(ctx, tx, "invoice-7", lock.Token()); err != nil {
		return err // fencing.ErrStaleToken: a later holder got there first
	}
	if _, err := tx.ExecContext(ctx, "UPDATE invoices SET paid = true WHERE id = $1", 7); err != nil {
		return err
	}
	return tx.Commit() // the token and the data commit together, or not at all
	// end doc block
}

func httpGuard(ctx context.Context, g fencing.Guard, mux *http.ServeMux, lock *redlock.Lock, url string, body io.Reader) (*http.Response, error) {
	// doc block: docs/fencing.md
	// Server side: the handler runs only for a token not lower than any admitted for its resource.
	mw := fencing.Middleware(g, func(r *http.Request) string { return r.PathValue("id") })
	mux.Handle("PUT /files/{id}", mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, _ := fencing.TokenFromContext(r.Context()) // the admitted token
		fmt.Fprintf(w, "written under token %d\n", token)
	})))

	// Client side:
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, url, body)
	if err != nil {
		return nil, err
	}
	fencing.SetToken(req, lock.Token()) // Fencing-Token: <token>
	return http.DefaultClient.Do(req)
	// end doc block
}

var _, _, _, _ = memoryGuard, redisGuard, sqlGuard, httpGuard
