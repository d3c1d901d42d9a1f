package fencing_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/fencedlock/fencedlock/fencing"
	"github.com/fencedlock/fencedlock/internal/redistest"
)

// decisions is a GuardObserver that keeps what it heard.
type decisions struct {
	mu  sync.Mutex // protects got
	got []string
}

func (d *decisions) Admitted(resource string, token uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.got = append(d.got, fmt.Sprintf("admitted %s %d", resource, token))
}

func (d *decisions) Rejected(resource string, token, highest uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.got = append(d.got, fmt.Sprintf("rejected %s %d %d", resource, token, highest))
}

// TestWithObserver: every guard, and the middleware, reports each
// admission and each stale-token rejection once; bad input is no decision.
func TestWithObserver(t *testing.T) {
	httpGuard := func(g fencing.Guard, opt fencing.Option) fencing.Guard {
		h := fencing.Middleware(g, func(r *http.Request) string { return r.URL.Path[1:] }, opt)(
			http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		return guardFunc(func(ctx context.Context, resource string, token uint64) error {
			req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/"+resource, nil)
			if token > 0 {
				fencing.SetToken(req, token)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != http.StatusOK {
				return fmt.Errorf("status %d", w.Code)
			}
			return nil
		})
	}
	tests := []struct {
		name  string
		guard func(t *testing.T, opt fencing.Option) fencing.Guard
	}{
		{"memory", func(t *testing.T, opt fencing.Option) fencing.Guard { return fencing.NewMemoryWith(opt) }},
		{"redis", func(t *testing.T, opt fencing.Option) fencing.Guard {
			return fencing.NewRedis(redistest.Client(t, redistest.Start(t)), opt)
		}},
		{"sqlite", func(t *testing.T, opt fencing.Option) fencing.Guard {
			db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "obs.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() })
			g, err := fencing.NewSQL(db, fencing.SQLite, opt)
			if err != nil {
				t.Fatal(err)
			}
			if err := g.Init(t.Context()); err != nil {
				t.Fatal(err)
			}
			return g
		}},
		{"middleware", func(t *testing.T, opt fencing.Option) fencing.Guard { return httpGuard(fencing.NewMemory(), opt) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &decisions{}
			g := tt.guard(t, fencing.WithObserver(d))
			ctx := t.Context()
			for _, tok := range []uint64{5, 7, 6, 7, 0} {
				_ = g.Admit(ctx, "r", tok)
			}
			want := []string{"admitted r 5", "admitted r 7", "rejected r 6 7", "admitted r 7"}
			d.mu.Lock()
			defer d.mu.Unlock()
			if !slices.Equal(d.got, want) {
				t.Errorf("decisions %q, want %q", d.got, want)
			}
		})
	}
}

// cancelOnAdmit is a decisions that also cancels a ctx when it hears an
// admission: the caller's deadline running out just after the decision.
// readOnAdmit reads, from another connection, the highest token committed
// for the resource when it hears an admission.
type readOnAdmit struct {
	decisions
	read func() (uint64, error)
	seen uint64
	err  error
}

func (r *readOnAdmit) Admitted(resource string, token uint64) {
	r.decisions.Admitted(resource, token)
	r.seen, r.err = r.read()
}

// TestWithObserverSQLAdmitReportsOnlyWhatCommitted: SQL.Admit runs its own
// transaction, so what it reports is its outcome: the observer hears an
// admission once it is committed (it heard it at the upsert, and a commit
// that then failed left an admission counted that never happened).
func TestWithObserverSQLAdmitReportsOnlyWhatCommitted(t *testing.T) {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "obs.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	o := &readOnAdmit{}
	g, err := fencing.NewSQL(db, fencing.SQLite, fencing.WithObserver(o))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Init(t.Context()); err != nil {
		t.Fatal(err)
	}
	o.read = func() (uint64, error) { return g.Highest(t.Context(), "r") }
	if err := g.Admit(t.Context(), "r", 5); err != nil {
		t.Fatal(err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.got) != 1 || o.err != nil || o.seen != 5 {
		t.Fatalf("the observer heard %q, and read highest %d (%v) then: want the admission of 5, committed", o.got, o.seen, o.err)
	}
}
