package fencing_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/fencing"
)

func ExampleMemory() {
	ctx := context.Background()
	g := fencing.NewMemory()

	// Holder A got token 33 from its lock, then paused; holder B got 34.
	_ = g.Append(ctx, "report.pdf", 34, "written by B")
	err := g.Append(ctx, "report.pdf", 33, "written by A after its pause")

	var stale *fencing.StaleTokenError
	if errors.As(err, &stale) {
		fmt.Printf("refused token %d: %d already admitted\n", stale.Token, stale.Highest)
	}
	fmt.Println(errors.Is(err, fencing.ErrStaleToken), g.Log("report.pdf"))
	// Output:
	// refused token 33: 34 already admitted
	// true [{34 written by B}]
}

func ExampleMiddleware() {
	g := fencing.NewMemory()
	resource := func(r *http.Request) string { return strings.TrimPrefix(r.URL.Path, "/files/") }
	h := fencing.Middleware(g, resource)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, _ := fencing.TokenFromContext(r.Context())
		fmt.Fprintf(w, "saved under token %d\n", token)
	}))

	for _, token := range []uint64{34, 33} {
		req := httptest.NewRequest(http.MethodPut, "/files/report.pdf", nil)
		fencing.SetToken(req, token) // the client side: the holder's lock token
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		fmt.Print(rec.Code, " ", rec.Body)
	}
	// Output:
	// 200 saved under token 34
	// 409 {"error":"stale fencing token","resource":"report.pdf","token":33,"highest":34}
}

func ExampleSQL_AdmitTx() {
	ctx := context.Background()
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		panic(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // each connection to ":memory:" is a database of its own

	g, err := fencing.NewSQL(db, fencing.SQLite)
	if err != nil {
		panic(err)
	}
	if err := g.Init(ctx); err != nil {
		panic(err)
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE reports (name TEXT PRIMARY KEY, body TEXT)"); err != nil {
		panic(err)
	}

	// save writes the report only if token is not stale: the check and the
	// write commit together, or not at all.
	save := func(token uint64, body string) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if err := g.AdmitTx(ctx, tx, "report", token); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "INSERT OR REPLACE INTO reports VALUES ('report', ?)", body); err != nil {
			return err
		}
		return tx.Commit()
	}
	fmt.Println(save(34, "by B"))
	fmt.Println(save(33, "by A"))

	var body string
	_ = db.QueryRowContext(ctx, "SELECT body FROM reports").Scan(&body)
	fmt.Println(body)
	// Output:
	// <nil>
	// fencing: stale token 33 for resource "report": 34 already admitted
	// by B
}

func ExampleRedis() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	g := fencing.NewRedis(rdb)

	// One script checks the token and sets the key: no window in between.
	// On a Redis Cluster the key must share the resource's hash tag.
	err := g.Set(ctx, "invoice-7", 34, "invoices:{invoice-7}", `{"total":120}`)
	if errors.Is(err, fencing.ErrStaleToken) {
		fmt.Println("a newer lock holder has written; drop this write")
	}
}
