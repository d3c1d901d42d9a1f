package doctor

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/internal/redistest"
)

func TestReach(t *testing.T) {
	p := redistest.Start(t, redistest.WithArgs("--user", "locker", "on", ">secret", "~*", "&*", "+@all"))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	_ = l.Close()
	silent, err := net.Listen("tcp", "127.0.0.1:0") // accepts, never answers
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()

	cases := []struct {
		name        string
		opts        redis.Options
		unreachable bool
		why         string
	}{
		{"answers", redis.Options{Addr: p.Addr(), Username: "locker", Password: "secret"}, false, ""},
		{"wrong password", redis.Options{Addr: p.Addr(), Username: "locker", Password: "wrong"}, false, "WRONGPASS"},
		{"refused", redis.Options{Addr: closed}, true, "connection refused"},
		{"silent", redis.Options{Addr: silent.Addr().String(), ReadTimeout: 50 * time.Millisecond}, true, "timeout"},
		{"no such host", redis.Options{Addr: "nosuchhost.invalid:6379"}, true, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.MaxRetries, tc.opts.DialerRetries = -1, 1
			rdb := redis.NewClient(&tc.opts)
			defer rdb.Close()
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			defer cancel()
			err := Reach(ctx, rdb)
			if got := Unreachable(err); got != tc.unreachable {
				t.Fatalf("Unreachable(%v) = %v, want %v", err, got, tc.unreachable)
			}
			if tc.why == "" {
				return
			}
			if err == nil {
				t.Fatalf("no error, want %q", tc.why)
			}
			if got := Why(err); !strings.Contains(got, tc.why) {
				t.Errorf("Why(%v) = %q, want %q in it", err, got, tc.why)
			}
		})
	}
}
