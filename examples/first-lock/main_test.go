package main

import (
	"bytes"
	"errors"
	"math"
	"regexp"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fencedlock/fencedlock/fencing"
	"github.com/fencedlock/fencedlock/internal/redisproc"
	"github.com/fencedlock/fencedlock/internal/redistest"
	"github.com/fencedlock/fencedlock/redlock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRun runs the README's first program against three real nodes: a free
// key, a key someone else holds, and a store that has already seen a later
// token.
func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name    string
		setup   func(t *testing.T, procs []*redisproc.Proc, store *fencing.Memory)
		wantErr error
		want    []*regexp.Regexp
		entries int
	}{
		{
			name: "free",
			want: []*regexp.Regexp{
				regexp.MustCompile(`(?m)^holding invoice:42 with token [1-9]\d* until \d{4}-`),
				regexp.MustCompile(`(?m)^released; the store has 3 entries$`),
			},
			entries: 3,
		},
		{
			name: "held by another client",
			setup: func(t *testing.T, procs []*redisproc.Proc, _ *fencing.Memory) {
				locks, err := redlock.New(redistest.Clients(t, procs))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = locks.Close() })
				l, err := locks.TryLock(t.Context(), "invoice:42", time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = l.Unlock(t.Context()) })
			},
			want: []*regexp.Regexp{
				regexp.MustCompile(`(?m)^invoice:42 is busy: .*not acquired`),
			},
		},
		{
			name: "store saw a later token",
			setup: func(t *testing.T, _ []*redisproc.Proc, store *fencing.Memory) {
				if err := store.Admit(t.Context(), "invoice:42", math.MaxInt64); err != nil {
					t.Fatal(err)
				}
			},
			wantErr: fencing.ErrStaleToken,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			procs := redistest.StartN(t, 3)
			var addrs []string
			for _, p := range procs {
				addrs = append(addrs, p.Addr())
			}
			store := fencing.NewMemory()
			if tc.setup != nil {
				tc.setup(t, procs, store)
			}
			var out bytes.Buffer
			err := run(t.Context(), addrs, store, &out)
			if !errors.Is(err, tc.wantErr) || (err != nil && tc.wantErr == nil) {
				t.Fatalf("run: %v, want %v\noutput:\n%s", err, tc.wantErr, &out)
			}
			for _, want := range tc.want {
				if !want.MatchString(out.String()) {
					t.Errorf("output does not match %s:\n%s", want, &out)
				}
			}
			if got := len(store.Log("invoice:42")); got != tc.entries {
				t.Errorf("store has %d entries, want %d", got, tc.entries)
			}
		})
	}
}
