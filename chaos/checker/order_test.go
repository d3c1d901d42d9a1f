package checker

import (
	"slices"
	"testing"

	"github.com/fencedlock/fencedlock/chaos/history"
)

// TestOrder checks which overtakes count, on hand-built histories: client 0
// holds "k" from 0 to 20 ms, and the others wait for it (the margin is 2 ms).
func TestOrder(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(b *builder)
		want  []int // the ops of the violation: the overtaken acquire, the grant
	}{
		{"overtaken", func(b *builder) {
			b.acquire(1, 5, 40, 30, 3)  // 2
			b.acquire(2, 10, 25, 10, 2) // 3: began 5 ms later, got it first
		}, []int{2, 3}},
		{"overtaken, the waiter never returned", func(b *builder) {
			b.add(history.Op{Kind: history.KindAcquire, Client: 1, Key: "k", Invoke: ms(5)})
			b.acquire(2, 10, 25, 10, 2)
		}, []int{2, 3}},
		{"the oldest waiter is named", func(b *builder) {
			b.acquire(1, 5, 50, 30, 4)
			b.acquire(3, 6, 40, 30, 3)
			b.acquire(2, 10, 25, 10, 2)
		}, []int{2, 4}},
		{"served in order", func(b *builder) {
			b.acquire(1, 5, 25, 10, 2)
			b.acquire(2, 10, 40, 30, 3)
		}, nil},
		{"within the margin", func(b *builder) {
			b.acquire(1, 5, 40, 30, 3)
			b.acquire(2, 6.5, 25, 10, 2)
		}, nil},
		{"the key was free when the waiter began", func(b *builder) {
			b.acquire(1, 22, 60, 30, 3)
			b.acquire(2, 30, 45, 10, 2)
		}, nil},
		{"the key was the waiter's own", func(b *builder) {
			b.acquire(0, 5, 40, 30, 3)
			b.acquire(2, 10, 25, 10, 2)
		}, nil},
		{"one client's two calls", func(b *builder) {
			b.acquire(1, 5, 40, 30, 3)
			b.acquire(1, 10, 25, 10, 2)
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuilder(5)
			h := b.acquire(0, 0, 1, 30, 1) // 1
			tc.build(b)
			b.release(h, 20, 21)
			res := Check(b.done(100), CheckOptions{OrderMargin: ms(2)})
			var got []int
			for _, v := range res.Violations {
				if v.Property == Order {
					if got != nil {
						t.Fatalf("more than one overtake: %+v", res.Violations)
					}
					got = v.Ops
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("overtake %v, want %v (%+v)", got, tc.want, res.Violations)
			}
		})
	}
}
