package fencing

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

// Dialect selects the SQL syntax of a SQL guard.
type Dialect int

const (
	// SQLite: ? placeholders; needs SQLite 3.24 or later (upsert).
	SQLite Dialect = iota + 1
	// Postgres: $1 placeholders; needs PostgreSQL 9.5 or later.
	Postgres
)

func (d Dialect) String() string {
	switch d {
	case SQLite:
		return "sqlite"
	case Postgres:
		return "postgres"
	}
	return fmt.Sprintf("Dialect(%d)", int(d))
}

// SQL is a Guard that keeps high-water marks in a table of a SQL database,
// through database/sql:
//
//	CREATE TABLE fencing_tokens (resource TEXT PRIMARY KEY, token BIGINT NOT NULL)
//
// The check is one conditional upsert, so it is atomic on its own; run it with
// AdmitTx in the transaction that writes the guarded data, and the write
// commits only if the token was admitted. It is safe for concurrent use.
//
// Tokens must fit a BIGINT: a token above math.MaxInt64 is refused with
// ErrInvalidArgument rather than wrapped around, and so is a resource that is
// not valid UTF-8 or holds a NUL byte, which PostgreSQL's TEXT cannot store. In PostgreSQL the upsert locks
// the resource's row until the transaction ends, so writers of one resource are
// serialised; under REPEATABLE READ or SERIALIZABLE a concurrent writer gets a
// serialization failure, which the caller retries. SQLite serialises all
// writers; give concurrent writers a busy timeout (modernc.org/sqlite DSN:
// "_pragma=busy_timeout(5000)&_txlock=immediate").
type SQL struct {
	db      *sql.DB
	dialect Dialect
	table   string
	upsert  string        // admits $1/?=resource, $2/?=token; affects 0 rows when stale
	highest string        // selects the token of one resource
	obs     GuardObserver // nil: none
}

var _ Guard = (*SQL)(nil)

// SQLOption configures NewSQL; every [Option] is one.
type SQLOption interface{ applySQL(*SQL) }

type sqlOptionFunc func(*SQL)

func (f sqlOptionFunc) applySQL(g *SQL) { f(g) }

// WithTable sets the table name. Default "fencing_tokens". It must be a plain
// identifier: ASCII letters, digits and '_', not starting with a digit. It is
// quoted in every statement, so a reserved word ("order") works, and the name
// is used exactly as given: case-sensitive in PostgreSQL.
func WithTable(name string) SQLOption { return sqlOptionFunc(func(g *SQL) { g.table = name }) }

// NewSQL returns a guard on db in the given dialect. Call Init once to create
// the table, unless a migration does it.
func NewSQL(db *sql.DB, d Dialect, opts ...SQLOption) (*SQL, error) {
	g := &SQL{db: db, dialect: d, table: "fencing_tokens"}
	for _, o := range opts {
		if o != nil {
			o.applySQL(g)
		}
	}
	if db == nil {
		return nil, invalidf("nil *sql.DB")
	}
	if !isIdent(g.table) {
		return nil, invalidf("table name %q is not a plain identifier", g.table)
	}
	var p1, p2 string
	switch d {
	case SQLite:
		p1, p2 = "?", "?"
	case Postgres:
		p1, p2 = "$1", "$2"
	default:
		return nil, invalidf("unknown dialect %v", d)
	}
	table := g.quoted()
	g.upsert = "INSERT INTO " + table + " (resource, token) VALUES (" + p1 + ", " + p2 + ")" +
		" ON CONFLICT (resource) DO UPDATE SET token = excluded.token" +
		" WHERE " + table + ".token <= excluded.token"
	g.highest = "SELECT token FROM " + table + " WHERE resource = " + p1
	return g, nil
}

// Init creates the table if it does not exist.
func (g *SQL) Init(ctx context.Context) error {
	_, err := g.db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+g.quoted()+
		" (resource TEXT PRIMARY KEY, token BIGINT NOT NULL)")
	if err != nil {
		return fmt.Errorf("fencing: sql: create table %s: %w", g.table, err)
	}
	return nil
}

// Admit records token for resource if it is not stale, in a transaction of its
// own. To guard a write, use AdmitTx in the write's transaction instead.
func (g *SQL) Admit(ctx context.Context, resource string, token uint64) error {
	if err := validateSQL(resource, token); err != nil {
		return err
	}
	tx, err := g.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("fencing: sql: begin: %w", err)
	}
	// Admit owns its commit: the observer hears the outcome once it is
	// committed (or refused), not at the upsert as AdmitTx's does.
	err = g.upsertTx(ctx, tx, resource, token)
	if err != nil {
		_ = tx.Rollback()
	} else if cerr := tx.Commit(); cerr != nil {
		return fmt.Errorf("fencing: sql: commit: %w", cerr)
	}
	return observe(g.obs, resource, token, err)
}

// AdmitTx records token for resource in tx if it is not stale. The caller
// writes the guarded data in the same tx and commits; on any error it must
// roll back. The record, like the data, counts only once tx commits.
func (g *SQL) AdmitTx(ctx context.Context, tx *sql.Tx, resource string, token uint64) error {
	if err := validateSQL(resource, token); err != nil {
		return err
	}
	return observe(g.obs, resource, token, g.upsertTx(ctx, tx, resource, token))
}

// upsertTx is AdmitTx's statement and the reading of its outcome.
func (g *SQL) upsertTx(ctx context.Context, tx *sql.Tx, resource string, token uint64) error {
	res, err := tx.ExecContext(ctx, g.upsert, resource, int64(token))
	if err != nil {
		return fmt.Errorf("fencing: sql: admit %q: %w", resource, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("fencing: sql: admit %q: %w", resource, err)
	}
	if n > 0 {
		return nil
	}
	// Stale. The upsert left the row locked (PostgreSQL) or the database
	// reserved (SQLite), so this reads the value that refused the token.
	h, err := g.scanHighest(tx.QueryRowContext(ctx, g.highest, resource), resource)
	if err != nil {
		return err
	}
	return &StaleTokenError{Resource: resource, Token: token, Highest: h}
}

// Highest returns the highest token admitted (and committed) for resource, or 0.
func (g *SQL) Highest(ctx context.Context, resource string) (uint64, error) {
	if err := storable(resource); err != nil {
		return 0, err
	}
	h, err := g.scanHighest(g.db.QueryRowContext(ctx, g.highest, resource), resource)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return h, err
}

func (g *SQL) scanHighest(row *sql.Row, resource string) (uint64, error) {
	var h int64
	if err := row.Scan(&h); err != nil {
		return 0, fmt.Errorf("fencing: sql: high-water mark of %q: %w", resource, err)
	}
	if h < 0 {
		return 0, fmt.Errorf("fencing: sql: high-water mark of %q is negative: %d", resource, h)
	}
	return uint64(h), nil
}

func validateSQL(resource string, token uint64) error {
	if err := validate(resource, token); err != nil {
		return err
	}
	if token > math.MaxInt64 {
		return invalidf("token %d does not fit a SQL BIGINT (max %d)", token, int64(math.MaxInt64))
	}
	return storable(resource)
}

// storable refuses a resource that a TEXT column cannot hold in PostgreSQL
// (SQLite could, but a resource means the same in both).
func storable(resource string) error {
	switch {
	case !utf8.ValidString(resource):
		return invalidf("resource %q is not valid UTF-8", resource)
	case strings.IndexByte(resource, 0) >= 0:
		return invalidf("resource %q holds a NUL byte", resource)
	}
	return nil
}

// quoted is the table name as a quoted identifier: isIdent lets no quote in.
func (g *SQL) quoted() string { return `"` + g.table + `"` }

func isIdent(s string) bool {
	for i, c := range s {
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return s != ""
}
