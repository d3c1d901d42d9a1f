package pgtest_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/fencedlock/fencedlock/internal/pgtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestStart(t *testing.T) {
	s := pgtest.Start(t)
	ctx := t.Context()

	var one int
	if err := s.Open(t).QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("SELECT 1 = %d, %v", one, err)
	}

	// Databases from NewDB are separate: a table in one is not in the other.
	a, b := s.NewDB(t), s.NewDB(t)
	if _, err := a.ExecContext(ctx, "CREATE TABLE only_in_a (x int)"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ExecContext(ctx, "SELECT * FROM only_in_a"); err == nil {
		t.Fatal("table of one NewDB database is visible in another")
	}
}
