package fencing_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/fencedlock/fencedlock/fencing"
)

// store is what the shared suite needs of every Guard implementation: an
// Appender whose state can be read back.
type store interface {
	fencing.Appender
	Highest(ctx context.Context, resource string) (uint64, error)
	Log(ctx context.Context, resource string) ([]fencing.Entry, error)
}

// suite describes one implementation for testGuard.
type suite struct {
	store    store
	maxToken uint64 // the highest token the storage can hold
	writers  int    // goroutines in the concurrency test
	perW     int    // appends per writer
}

// testGuard runs the behaviour every Guard shares. Subtests use their own
// resource names (t.Name()), so they may share one store.
func testGuard(t *testing.T, s suite) {
	t.Run("sequence", func(t *testing.T) {
		const stale = true
		type step struct {
			token   uint64
			stale   bool
			highest uint64 // reported by a stale step
		}
		const p53 = 1 << 53
		tests := []struct {
			name  string
			steps []step
		}{
			{"first token", []step{{token: 5}}},
			{"increasing", []step{{token: 1}, {token: 2}, {token: 10}}},
			{"equal tokens are admitted", []step{{token: 7}, {token: 7}, {token: 7}}},
			{"lower is stale", []step{{token: 7}, {6, stale, 7}, {token: 8}, {7, stale, 8}}},
			{"stale does not lower the mark", []step{{token: 10}, {3, stale, 10}, {4, stale, 10}, {token: 10}}},
			{"beyond 2^53 exactly", []step{{token: p53 + 1}, {p53, stale, p53 + 1}, {token: p53 + 2}}},
			{"max token", []step{{token: s.maxToken - 1}, {token: s.maxToken}, {s.maxToken - 1, stale, s.maxToken}}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				ctx, res := t.Context(), t.Name()
				var want uint64
				for i, st := range tt.steps {
					err := s.store.Admit(ctx, res, st.token)
					if !st.stale {
						if err != nil {
							t.Fatalf("step %d: Admit(%d) = %v, want admitted", i, st.token, err)
						}
						want = st.token
						continue
					}
					var se *fencing.StaleTokenError
					if !errors.Is(err, fencing.ErrStaleToken) || !errors.As(err, &se) {
						t.Fatalf("step %d: Admit(%d) = %v, want a *StaleTokenError", i, st.token, err)
					}
					if *se != (fencing.StaleTokenError{Resource: res, Token: st.token, Highest: st.highest}) {
						t.Fatalf("step %d: error %+v, want highest %d", i, *se, st.highest)
					}
				}
				wantHighest(t, s.store, res, want)
			})
		}
	})

	t.Run("resources are independent", func(t *testing.T) {
		ctx, a, b := t.Context(), t.Name()+"/a", t.Name()+"/b"
		mustAdmit(t, s.store, a, 100)
		mustAdmit(t, s.store, b, 1)
		wantHighest(t, s.store, a, 100)
		wantHighest(t, s.store, b, 1)
		if err := s.store.Append(ctx, b, 2, "x"); err != nil {
			t.Fatal(err)
		}
		wantLog(t, s.store, a, nil)
	})

	t.Run("invalid argument", func(t *testing.T) {
		tests := []struct {
			name     string
			resource string
			token    uint64
		}{
			{"empty resource", "", 1},
			{"zero token", t.Name(), 0},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				if err := s.store.Admit(t.Context(), tt.resource, tt.token); !errors.Is(err, fencing.ErrInvalidArgument) {
					t.Errorf("Admit = %v, want ErrInvalidArgument", err)
				}
				if err := s.store.Append(t.Context(), tt.resource, tt.token, "x"); !errors.Is(err, fencing.ErrInvalidArgument) {
					t.Errorf("Append = %v, want ErrInvalidArgument", err)
				}
			})
		}
		wantHighest(t, s.store, t.Name(), 0)
	})

	t.Run("cancelled context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := s.store.Admit(ctx, t.Name(), 3); !errors.Is(err, context.Canceled) {
			t.Errorf("Admit = %v, want context.Canceled", err)
		}
		wantHighest(t, s.store, t.Name(), 0)
	})

	t.Run("append", func(t *testing.T) {
		ctx, res := t.Context(), t.Name()
		steps := []struct {
			token uint64
			data  string
			stale bool
		}{
			{1, "first", false},
			{3, "with space\nand newline", false},
			{2, "stale", true},
			{3, "", false},
			{4, "last", false},
		}
		for _, st := range steps {
			err := s.store.Append(ctx, res, st.token, st.data)
			if st.stale != errors.Is(err, fencing.ErrStaleToken) || (!st.stale && err != nil) {
				t.Fatalf("Append(%d, %q) = %v, want stale %v", st.token, st.data, err, st.stale)
			}
		}
		wantLog(t, s.store, res, []fencing.Entry{{1, "first"}, {3, "with space\nand newline"}, {3, ""}, {4, "last"}})
		wantHighest(t, s.store, res, 4)
	})

	t.Run("concurrent writers", func(t *testing.T) {
		testConcurrent(t, s)
	})
}

// testConcurrent lets many writers append under tokens drawn from one counter,
// as holders of successive locks would, and checks that the log is the serial
// order the guard promises: strictly increasing tokens (they are unique here),
// exactly the admitted appends, and a high-water mark equal to the last.
func testConcurrent(t *testing.T, s suite) {
	ctx, res := t.Context(), t.Name()
	var next atomic.Uint64
	type result struct {
		token uint64
		err   error
	}
	results := make([][]result, s.writers)
	var wg sync.WaitGroup
	for w := range s.writers {
		wg.Go(func() {
			for range s.perW {
				tok := next.Add(1)
				runtime.Gosched() // let other writers overtake: more stale tokens
				err := s.store.Append(ctx, res, tok, fmt.Sprint(tok))
				results[w] = append(results[w], result{tok, err})
			}
		})
	}
	wg.Wait()

	admitted := map[uint64]bool{}
	var stale int
	for _, rs := range results {
		for _, r := range rs {
			var se *fencing.StaleTokenError
			switch {
			case r.err == nil:
				admitted[r.token] = true
			case errors.As(r.err, &se):
				stale++
				if se.Highest <= r.token {
					t.Errorf("token %d refused with highest %d", r.token, se.Highest)
				}
			default:
				t.Errorf("token %d: %v", r.token, r.err)
			}
		}
	}
	log, err := s.store.Log(ctx, res)
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != len(admitted) {
		t.Errorf("log has %d entries, %d appends were admitted", len(log), len(admitted))
	}
	var last uint64
	for i, e := range log {
		if e.Token <= last {
			t.Fatalf("log[%d].Token = %d after %d: not in token order", i, e.Token, last)
		}
		if !admitted[e.Token] || e.Data != fmt.Sprint(e.Token) {
			t.Errorf("log[%d] = %+v was not admitted as such", i, e)
		}
		last = e.Token
	}
	wantHighest(t, s.store, res, last)
	t.Logf("%d writers: %d appends admitted, %d stale", s.writers, len(admitted), stale)
}

func mustAdmit(t *testing.T, g fencing.Guard, resource string, token uint64) {
	t.Helper()
	if err := g.Admit(t.Context(), resource, token); err != nil {
		t.Fatalf("Admit(%q, %d) = %v", resource, token, err)
	}
}

func wantHighest(t *testing.T, s store, resource string, want uint64) {
	t.Helper()
	got, err := s.Highest(t.Context(), resource)
	if err != nil || got != want {
		t.Errorf("Highest(%q) = %d, %v; want %d", resource, got, err, want)
	}
}

func wantLog(t *testing.T, s store, resource string, want []fencing.Entry) {
	t.Helper()
	got, err := s.Log(t.Context(), resource)
	if err != nil {
		t.Fatalf("Log(%q): %v", resource, err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("Log(%q) = %#v, want %#v", resource, got, want)
	}
}
