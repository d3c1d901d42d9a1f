package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/redlock"
)

func TestParseNodes(t *testing.T) {
	opts, err := parseNodes(" 10.0.0.1:6379, redis://:secret@db.example:6380/2 ,[::1]:7000", 250*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		addr, password string
		db             int
	}{{"10.0.0.1:6379", "", 0}, {"db.example:6380", "secret", 2}, {"[::1]:7000", "", 0}}
	if len(opts) != len(want) {
		t.Fatalf("%d nodes, want %d", len(opts), len(want))
	}
	for i, o := range opts {
		w := want[i]
		if o.Addr != w.addr || o.Password != w.password || o.DB != w.db {
			t.Errorf("node %d: addr %q password %q db %d, want %+v", i, o.Addr, o.Password, o.DB, w)
		}
		if o.DialTimeout != 250*time.Millisecond || o.ReadTimeout != 250*time.Millisecond ||
			o.MaxRetries != -1 || o.DialerRetries != 1 || !o.ContextTimeoutEnabled {
			t.Errorf("node %d: timeouts and retries not set for fast failure: %+v", i, o)
		}
	}
}

func TestDescribe(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	cases := []struct {
		err  error
		want string
	}{
		{&redlock.NodeError{Node: 1, Addr: "a:1", Err: refused}, "connection refused"},
		{fmt.Errorf("dial: %w", context.DeadlineExceeded), "timeout"},
		{errors.New("NOAUTH Authentication required."), "NOAUTH Authentication required."},
	}
	for _, tc := range cases {
		if got := describe(tc.err); got != tc.want {
			t.Errorf("describe(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
