package fencing_test

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/fencing"
	"github.com/fencedlock/fencedlock/internal/redistest"
)

// TestRedisFailsBeforeWriting: a call that fails changes nothing. Redis does
// not roll a script back, so everything that can fail must be checked before
// the script's first write.
func TestRedisFailsBeforeWriting(t *testing.T) {
	c := redistest.Client(t, redistest.Start(t))
	g := fencing.NewRedis(c)
	tests := []struct {
		name  string
		setup func(ctx context.Context, res string) error // corrupts one of the resource's keys
		call  func(ctx context.Context, res string) error // with token 5, above the mark 3
	}{
		{"append to a log of the wrong type",
			func(ctx context.Context, res string) error { return c.Set(ctx, "fencing:{"+res+"}:log", "x", 0).Err() },
			func(ctx context.Context, res string) error { return g.Append(ctx, res, 5, "e") }},
		{"append to a log that is a hash",
			func(ctx context.Context, res string) error {
				return c.HSet(ctx, "fencing:{"+res+"}:log", "f", "v").Err()
			},
			func(ctx context.Context, res string) error { return g.Append(ctx, res, 5, "e") }},
		{"high-water mark that is not a number",
			func(ctx context.Context, res string) error {
				return c.Set(ctx, "fencing:{"+res+"}:token", "3x", 0).Err()
			},
			func(ctx context.Context, res string) error { return g.Set(ctx, res, 5, "data:{"+res+"}", "v") }},
		{"high-water mark of the wrong type",
			func(ctx context.Context, res string) error {
				k := "fencing:{" + res + "}:token"
				return errors.Join(c.Del(ctx, k).Err(), c.RPush(ctx, k, "3").Err())
			},
			func(ctx context.Context, res string) error { return g.Set(ctx, res, 5, "data:{"+res+"}", "v") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, res := t.Context(), t.Name()
			if err := g.Admit(ctx, res, 3); err != nil {
				t.Fatal(err)
			}
			if err := tt.setup(ctx, res); err != nil {
				t.Fatal(err)
			}
			before := dump(t, c, res)
			err := tt.call(ctx, res)
			if err == nil || errors.Is(err, fencing.ErrStaleToken) {
				t.Fatalf("call = %v, want a storage error", err)
			}
			if after := dump(t, c, res); after != before {
				t.Errorf("a failed call changed the keys:\nbefore %q\nafter  %q", before, after)
			}
		})
	}
}

// dump is every key of res's slot with its type and value: what a failed
// call must leave as it was.
func dump(t *testing.T, c *redis.Client, res string) string {
	t.Helper()
	ctx := t.Context()
	keys, err := c.Keys(ctx, "*{"+res+"}*").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := ""
	for _, k := range keys {
		v, err := c.Dump(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		out += k + "=" + v + ";"
	}
	return out
}

// TestRedisSetRefusesGuardKeys: Set must not write any key of the guard's
// namespace, or it could lower a resource's mark or corrupt its log.
func TestRedisSetRefusesGuardKeys(t *testing.T) {
	c := redistest.Client(t, redistest.Start(t))
	g := fencing.NewRedis(c)
	ctx := t.Context()
	mustAdmit(t, g, "victim", 9)
	if err := g.Append(ctx, "mine", 1, "entry"); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, resource, key string }{
		{"own log", "mine", "fencing:{mine}:log"},
		{"own mark", "mine", "fencing:{mine}:token"},
		{"another resource's mark, same slot", "victim}x", "fencing:{victim}:token"},
		{"another resource's log, same slot", "victim}x", "fencing:{victim}:log"},
		{"any key of the namespace", "mine", "fencing:{mine}:anything"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := g.Set(ctx, tt.resource, 10, tt.key, "1")
			if !errors.Is(err, fencing.ErrInvalidArgument) {
				t.Errorf("Set(%q, %q) = %v, want ErrInvalidArgument", tt.resource, tt.key, err)
			}
		})
	}
	wantHighest(t, g, "victim", 9)
	if err := g.Admit(ctx, "victim", 8); !errors.Is(err, fencing.ErrStaleToken) {
		t.Errorf("Admit(victim, 8) = %v: its mark was lowered", err)
	}
	wantLog(t, g, "mine", []fencing.Entry{{Token: 1, Data: "entry"}})
	// Keys outside the namespace are the caller's, even when they look alike.
	for _, key := range []string{"fencing:mine}", "Fencing:{mine}:log", "data:fencing:{mine}:log"} {
		if err := g.Set(ctx, "mine", 2, key, "v"); err != nil {
			t.Errorf("Set(%q) = %v", key, err)
		}
	}
}

// TestRedisLostReply: go-redis retries a call whose connection broke before
// the reply came, by default up to 3 times. The guard applied the first run:
// the retry must report that run's outcome, not apply it again, also when a
// newer holder got in between.
func TestRedisLostReply(t *testing.T) {
	srv := redistest.Start(t)
	direct := redistest.Client(t, srv)
	newer := fencing.NewRedis(direct)
	ops := []struct {
		name string
		call func(ctx context.Context, g *fencing.Redis, res string, token uint64) error
		want func(t *testing.T, res string, withNewer bool) // the state afterwards
	}{
		{"admit",
			func(ctx context.Context, g *fencing.Redis, res string, token uint64) error {
				return g.Admit(ctx, res, token)
			},
			func(t *testing.T, res string, withNewer bool) {}},
		{"set",
			func(ctx context.Context, g *fencing.Redis, res string, token uint64) error {
				return g.Set(ctx, res, token, "data:{"+res+"}", "v"+strconv.FormatUint(token, 10))
			},
			func(t *testing.T, res string, withNewer bool) {
				want := "v5"
				if withNewer {
					want = "v6"
				}
				if got := direct.Get(t.Context(), "data:{"+res+"}").Val(); got != want {
					t.Errorf("data = %q, want %q", got, want)
				}
			}},
		{"append",
			func(ctx context.Context, g *fencing.Redis, res string, token uint64) error {
				return g.Append(ctx, res, token, "e"+strconv.FormatUint(token, 10))
			},
			func(t *testing.T, res string, withNewer bool) {
				want := []fencing.Entry{{Token: 5, Data: "e5"}}
				if withNewer {
					want = append(want, fencing.Entry{Token: 6, Data: "e6"})
				}
				wantLog(t, newer, res, want)
			}},
	}
	for _, op := range ops {
		for _, withNewer := range []bool{false, true} {
			name := op.name
			if withNewer {
				name += ", newer holder in between"
			}
			t.Run(name, func(t *testing.T) {
				ctx, res := t.Context(), t.Name()
				proxy := newLostReplyProxy(t, srv.Addr())
				c := redis.NewClient(&redis.Options{Addr: proxy.addr()}) // go-redis's default retries
				t.Cleanup(func() { _ = c.Close() })
				g := fencing.NewRedis(c)
				mustAdmit(t, g, res, 1) // scripts loaded, a connection in the pool
				proxy.arm(func() {
					if withNewer {
						if err := op.call(ctx, newer, res, 6); err != nil {
							t.Errorf("newer holder: %v", err)
						}
					}
				})
				before := proxy.scripts.Load()
				if err := op.call(ctx, g, res, 5); err != nil {
					t.Errorf("call whose first reply was lost = %v, want nil: it was applied", err)
				}
				if proxy.dropped.Load() != 1 || proxy.scripts.Load()-before < 2 {
					t.Fatalf("dropped %d replies, %d script calls: the client did not retry",
						proxy.dropped.Load(), proxy.scripts.Load()-before)
				}
				want := uint64(5)
				if withNewer {
					want = 6
				}
				wantHighest(t, newer, res, want)
				op.want(t, res, withNewer)
			})
		}
	}

	t.Run("distinct calls are not merged", func(t *testing.T) {
		ctx, res := t.Context(), t.Name()
		for range 2 {
			if err := newer.Append(ctx, res, 7, "same"); err != nil {
				t.Fatal(err)
			}
		}
		wantLog(t, newer, res, []fencing.Entry{{Token: 7, Data: "same"}, {Token: 7, Data: "same"}})
	})
}
