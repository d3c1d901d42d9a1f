package fencing_test

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/fencedlock/fencedlock/fencing"
	"github.com/fencedlock/fencedlock/internal/pgtest"
)

func TestSQLite(t *testing.T) {
	// Concurrent writers need a busy timeout, and BEGIN IMMEDIATE so that a
	// transaction takes the write lock at its start.
	dsn := "file:" + filepath.Join(t.TempDir(), "fencing.db") +
		"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(OFF)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	testSQL(t, db, fencing.SQLite, "id INTEGER PRIMARY KEY AUTOINCREMENT", 32, 10)
}

func TestPostgres(t *testing.T) {
	t.Parallel() // overlaps the server's start with the other parallel tests
	db := pgtest.Start(t).NewDB(t)
	testSQL(t, db, fencing.Postgres, "id BIGSERIAL PRIMARY KEY", 32, 10)
}

// testSQL runs the shared suite and the SQL-only behaviour on db. logID is the
// dialect's auto-increment primary key, for the test's log table.
func testSQL(t *testing.T, db *sql.DB, d fencing.Dialect, logID string, writers, perW int) {
	ctx := t.Context()
	g, err := fencing.NewSQL(db, d)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Init(ctx); err != nil {
		t.Fatal(err)
	}
	s := sqlStore{SQL: g, db: db, d: d}
	if _, err := db.ExecContext(ctx, "CREATE TABLE fencing_log ("+logID+", resource TEXT NOT NULL, token BIGINT NOT NULL, data TEXT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	testGuard(t, suite{store: s, maxToken: math.MaxInt64, writers: writers, perW: perW})

	t.Run("token beyond BIGINT", func(t *testing.T) {
		for _, tok := range []uint64{math.MaxInt64 + 1, math.MaxUint64} {
			if err := g.Admit(ctx, t.Name(), tok); !errors.Is(err, fencing.ErrInvalidArgument) {
				t.Errorf("Admit(%d) = %v, want ErrInvalidArgument", tok, err)
			}
		}
		wantHighest(t, s, t.Name(), 0)
	})

	t.Run("rollback undoes the admission", func(t *testing.T) {
		res := t.Name()
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := g.AdmitTx(ctx, tx, res, 10); err != nil {
			t.Fatal(err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		wantHighest(t, s, res, 0)
		mustAdmit(t, g, res, 5)
	})

	t.Run("stale in the caller's transaction", func(t *testing.T) {
		res := t.Name()
		mustAdmit(t, g, res, 10)
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback() }()
		var se *fencing.StaleTokenError
		if err := g.AdmitTx(ctx, tx, res, 9); !errors.As(err, &se) || se.Highest != 10 {
			t.Fatalf("AdmitTx(9) = %v, want stale with highest 10", err)
		}
		var one int
		if err := tx.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
			t.Errorf("transaction unusable after a stale token: %v", err)
		}
	})

	t.Run("resource the database cannot store", func(t *testing.T) {
		for _, res := range []string{"a\x00b", "\x00", "bad utf-8 \xff"} {
			if err := g.Admit(ctx, res, 1); !errors.Is(err, fencing.ErrInvalidArgument) {
				t.Errorf("Admit(%q) = %v, want ErrInvalidArgument", res, err)
			}
			// The middleware answers bad input with 400, a failing storage with 503.
			h := fencing.Middleware(g, func(*http.Request) string { return res })(http.NotFoundHandler())
			req := httptest.NewRequestWithContext(ctx, http.MethodPut, "/", nil)
			fencing.SetToken(req, 1)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusBadRequest {
				t.Errorf("resource %q through Middleware: %d %s, want 400", res, rec.Code, rec.Body)
			}
		}
	})

	t.Run("table named by a reserved word", func(t *testing.T) {
		for _, table := range []string{"order", "select", "Mixed_Case"} {
			other, err := fencing.NewSQL(db, d, fencing.WithTable(table))
			if err != nil {
				t.Fatalf("WithTable(%q): %v", table, err)
			}
			if err := other.Init(ctx); err != nil {
				t.Fatalf("WithTable(%q): Init: %v", table, err)
			}
			mustAdmit(t, other, t.Name(), 4)
			if h, err := other.Highest(ctx, t.Name()); err != nil || h != 4 {
				t.Errorf("Highest in %q = %d, %v; want 4", table, h, err)
			}
			stale := other.Admit(ctx, t.Name(), 3)
			if !errors.Is(stale, fencing.ErrStaleToken) {
				t.Errorf("Admit(3) in %q = %v, want stale", table, stale)
			}
		}
	})

	t.Run("custom table", func(t *testing.T) {
		res := t.Name()
		other, err := fencing.NewSQL(db, d, fencing.WithTable("other_tokens"))
		if err != nil {
			t.Fatal(err)
		}
		for range 2 { // Init is idempotent
			if err := other.Init(ctx); err != nil {
				t.Fatal(err)
			}
		}
		mustAdmit(t, other, res, 3)
		if h, err := other.Highest(ctx, res); err != nil || h != 3 {
			t.Errorf("Highest in other_tokens = %d, %v; want 3", h, err)
		}
		wantHighest(t, s, res, 0)
	})
}

// sqlStore appends to a log table in the transaction that admits the token:
// the way a SQL user guards a write.
type sqlStore struct {
	*fencing.SQL
	db *sql.DB
	d  fencing.Dialect
}

func (s sqlStore) Append(ctx context.Context, resource string, token uint64, entry string) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if err := s.AdmitTx(ctx, tx, resource, token); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, s.q("INSERT INTO fencing_log (resource, token, data) VALUES (?, ?, ?)"),
		resource, int64(token), entry); err != nil {
		return err
	}
	return tx.Commit()
}

func (s sqlStore) Log(ctx context.Context, resource string) ([]fencing.Entry, error) {
	rows, err := s.db.QueryContext(ctx, s.q("SELECT token, data FROM fencing_log WHERE resource = ? ORDER BY id"), resource)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var log []fencing.Entry
	for rows.Next() {
		var e fencing.Entry
		var tok int64
		if err := rows.Scan(&tok, &e.Data); err != nil {
			return nil, err
		}
		e.Token = uint64(tok)
		log = append(log, e)
	}
	return log, rows.Err()
}

// q rewrites ? placeholders as $n for PostgreSQL.
func (s sqlStore) q(query string) string {
	if s.d != fencing.Postgres {
		return query
	}
	var out []byte
	n := 0
	for i := range len(query) {
		if query[i] == '?' {
			n++
			out = append(out, '$', byte('0'+n))
			continue
		}
		out = append(out, query[i])
	}
	return string(out)
}

func TestNewSQLInvalid(t *testing.T) {
	db, err := sql.Open("sqlite", ":memory:") // connects on first use: never here
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	tests := []struct {
		name  string
		db    *sql.DB
		d     fencing.Dialect
		table string
	}{
		{"nil db", nil, fencing.SQLite, "t"},
		{"zero dialect", db, 0, "t"},
		{"unknown dialect", db, 99, "t"},
		{"empty table", db, fencing.Postgres, ""},
		{"table starts with a digit", db, fencing.Postgres, "1t"},
		{"table with a dash", db, fencing.Postgres, "a-b"},
		{"table injection", db, fencing.SQLite, "t; DROP TABLE users"},
		{"table not ASCII", db, fencing.SQLite, "tâble"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := fencing.NewSQL(tt.db, tt.d, fencing.WithTable(tt.table)); !errors.Is(err, fencing.ErrInvalidArgument) {
				t.Errorf("NewSQL = %v, want ErrInvalidArgument", err)
			}
		})
	}
}
