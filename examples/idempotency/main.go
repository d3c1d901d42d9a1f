// Command idempotency protects an order endpoint against duplicate submits
// (double clicks, client retries, a load balancer replaying a request) with
// two layers. A lock on "order:lock:{id}" (redlock TryLock: SET NX PX on a
// majority of nodes) covers the in-flight window: a concurrent duplicate is
// answered "in progress" at once, and the lock of a worker that crashed simply
// expires. A persistent idempotency record with a unique key (SQLite here,
// your orders database in production) makes a request repeated after
// completion return the stored result without doing the work again.
//
//	go run ./examples/idempotency [--nodes h1:6379,h2:6379,h3:6379]
package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"time"

	_ "modernc.org/sqlite" // pure-Go SQLite, driver name "sqlite"

	"github.com/fencedlock/fencedlock/internal/examplenodes"
	"github.com/fencedlock/fencedlock/redlock"
)

func main() { examplenodes.Main("idempotency", run) }

// orders handles order submissions idempotently. Several instances of a
// service share the Redis nodes and the database.
type orders struct {
	locks *redlock.Client
	db    *sql.DB
}

// submit processes order id once. It returns the HTTP status a handler would
// send and the result: 201 after processing, 200 with the stored result for a
// repeat, 409 while another request for the same order is in flight.
func (o *orders) submit(ctx context.Context, id string, process func(ctx context.Context) (string, error)) (int, string, error) {
	// Fast path: already done. (The lock is not needed to read a record.)
	if res, ok, err := o.stored(ctx, id); err != nil || ok {
		return 200, res, err
	}
	// The in-flight window. The TTL bounds how long a crashed worker blocks
	// retries; it must outlast normal processing (or use AutoExtend).
	l, err := o.locks.TryLock(ctx, "order:lock:{"+id+"}", 30*time.Second)
	if errors.Is(err, redlock.ErrNotAcquired) {
		// (Also when too few nodes answered: errors.As with a
		// *redlock.NodeError tells that apart, for a 503.)
		return 409, "in progress", nil
	}
	if err != nil {
		return 0, "", err
	}
	// Released when done, even if ctx ended: a retry need not wait 30s.
	defer l.Unlock(context.WithoutCancel(ctx))
	// Check again under the lock: a request may have completed between the
	// read above and the TryLock.
	if res, ok, err := o.stored(ctx, id); err != nil || ok {
		return 200, res, err
	}
	res, err := process(ctx)
	if err != nil {
		return 0, "", err // no record: a retry may process again
	}
	// The unique key is the backstop if the lock was ever lost mid-flight:
	// only one record per order can exist, and the loser returns the winner's.
	r, err := o.db.ExecContext(ctx, `INSERT INTO idempotency (id, result) VALUES (?, ?) ON CONFLICT (id) DO NOTHING`, id, res)
	if err != nil {
		return 0, "", err
	}
	if n, _ := r.RowsAffected(); n == 0 {
		res, _, err := o.stored(ctx, id)
		return 200, res, err
	}
	return 201, res, nil
}

func (o *orders) stored(ctx context.Context, id string) (string, bool, error) {
	var res string
	err := o.db.QueryRowContext(ctx, `SELECT result FROM idempotency WHERE id = ?`, id).Scan(&res)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	return res, err == nil, err
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	nodes, err := examplenodes.FromArgs(ctx, "idempotency", args, 3)
	if err != nil {
		return err
	}
	defer nodes.Close()
	fmt.Fprintln(stdout, "nodes:", nodes)

	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // each connection to ":memory:" is a database of its own
	if _, err := db.ExecContext(ctx, `CREATE TABLE idempotency (id TEXT PRIMARY KEY, result TEXT NOT NULL)`); err != nil {
		return err
	}

	// Two instances of the order service (two processes in production),
	// sharing the Redis nodes and the database.
	var instances [2]*orders
	for i := range instances {
		locks, err := redlock.New(nodes.Clients)
		if err != nil {
			return err
		}
		defer locks.Close()
		instances[i] = &orders{locks: locks, db: db}
	}
	instance1, instance2 := instances[0], instances[1]

	const id = "1001"
	charges := 0 // calls to the payment provider
	var charge func(ctx context.Context) (string, error)
	charge = func(ctx context.Context) (string, error) {
		charges++
		if charges == 1 {
			// While request #1 is in flight, the customer clicks again and
			// the duplicate lands on the other instance.
			code, res, err := instance2.submit(ctx, id, charge)
			if err != nil {
				return "", err
			}
			fmt.Fprintf(stdout, "request #2 order %s, concurrent duplicate: %d %s\n", id, code, res)
		}
		return fmt.Sprintf("charge ch_%s_%d", id, charges), nil
	}

	fmt.Fprintf(stdout, "request #1 order %s: processing (holds order:lock:{%s})\n", id, id)
	code, first, err := instance1.submit(ctx, id, charge)
	if err != nil {
		return fmt.Errorf("request #1: %w", err)
	}
	fmt.Fprintf(stdout, "request #1 order %s: %d processed, result %q\n", id, code, first)

	code, res, err := instance2.submit(ctx, id, charge)
	if err != nil {
		return fmt.Errorf("request #3: %w", err)
	}
	fmt.Fprintf(stdout, "request #3 order %s, repeated after completion: %d stored result %q (not processed again)\n", id, code, res)
	fmt.Fprintf(stdout, "payment provider charged %d time(s)\n", charges)
	if charges != 1 || code != 200 || res != first {
		return errors.New("duplicate protection failed")
	}
	return nil
}
