package redlock_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestARefusalAnnouncesOnlyAFirstWaiterChangedWithTheKeyFree runs
// acquire.lua by hand, as a Client sends it, and reads what it published:
// a refusal announces exactly when its entry changed the node's first
// waiter and the key is absent (docs/protocol.md, Claim 5). A key that is
// held (with a TTL or without one) will be released, and that release is
// announced: an announcement now would wake a head whose try the node
// refuses.
func TestARefusalAnnouncesOnlyAFirstWaiterChangedWithTheKeyFree(t *testing.T) {
	const (
		a, b     = "aaaaaaaa", "bbbbbbbb"
		departed = 1000 // A's waiter that left, its withdraw not arrived
		older    = 1500 // B's waiter
		younger  = 2000 // A's next waiter, the refused caller
		value    = "00000000-0000-7000-8000-0000aaaaaaaa"
	)
	type entry struct {
		member string
		since  int64
	}
	for _, tc := range []struct {
		name    string
		entries []entry
		hold    func(ctx context.Context, rc redis.UniversalClient, key string) error // nil: the key is free
		want    []string                                                              // channel suffix (Client id) and message, in pairs
	}{
		{name: "free, the refused caller becomes first",
			entries: []entry{{a, departed}},
			want:    []string{a, value + " 2000 " + a}},
		{name: "free, another Client becomes first",
			entries: []entry{{a, departed}, {b, older}},
			want:    []string{b, value + " 1500 " + b}},
		{name: "free, another Client was and stays first",
			entries: []entry{{b, older}}},
		{name: "held with a TTL",
			entries: []entry{{a, departed}},
			hold: func(ctx context.Context, rc redis.UniversalClient, key string) error {
				return rc.Set(ctx, key, "other", time.Hour).Err()
			}},
		{name: "held without expiry",
			entries: []entry{{a, departed}},
			hold: func(ctx context.Context, rc redis.UniversalClient, key string) error {
				return rc.Set(ctx, key, "other", 0).Err()
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, 1)
			rc := r.clients[0]
			ctx := t.Context()
			const key = "refusal-announce"
			order, leases := waitKeysOf(key)
			now, err := rc.Time(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range tc.entries {
				if err := rc.ZAdd(ctx, order, redis.Z{Score: float64(e.since), Member: e.member}).Err(); err != nil {
					t.Fatal(err)
				}
				if err := rc.ZAdd(ctx, leases, redis.Z{Score: float64(now.Add(time.Hour).UnixMilli()), Member: e.member}).Err(); err != nil {
					t.Fatal(err)
				}
			}
			if tc.hold != nil {
				if err := tc.hold(ctx, rc, key); err != nil {
					t.Fatal(err)
				}
			}
			const prefix = "fencedlock:released:"
			sub := rc.PSubscribe(ctx, prefix+"*")
			defer func() { _ = sub.Close() }()
			if _, err := sub.Receive(ctx); err != nil { // the confirmation
				t.Fatal(err)
			}

			res := evalOn(t, rc, "acquire.lua", acquireKeys(key), value, 60000, younger, a, 1000, 100) // a waiter: it enters
			if got, _ := res.([]any); len(got) == 0 || got[0] != int64(0) {
				t.Fatalf("acquire.lua: %v, want a refusal", res)
			}
			// The node runs commands in order: a marker published after
			// the script comes after anything the script published.
			const marker = "marker"
			if err := rc.Publish(ctx, prefix+"marker:"+key, marker).Err(); err != nil {
				t.Fatal(err)
			}
			var got []string
			for {
				m, err := sub.ReceiveMessage(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if m.Payload == marker {
					break
				}
				got = append(got, m.Channel[len(prefix):len(m.Channel)-len(":"+key)], m.Payload)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("published %q, want %q", got, tc.want)
			}
		})
	}
}
