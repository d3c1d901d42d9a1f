package holdproxy_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/fencedlock/fencedlock/internal/holdproxy"
	"github.com/fencedlock/fencedlock/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestHeldReplyComesAfterTheCommandRan(t *testing.T) {
	srv := redistest.Start(t)
	direct := redistest.Client(t, srv)
	p, err := holdproxy.Start(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	c := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	ctx := t.Context()
	if err := c.Ping(ctx).Err(); err != nil { // connection open before the hold
		t.Fatal(err)
	}

	p.Hold()
	answered := make(chan error, 1)
	go func() { answered <- c.Set(context.Background(), "k", "v", 0).Err() }()
	deadline := time.Now().Add(10 * time.Second)
	for direct.Get(ctx, "k").Val() != "v" || p.Held() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the SET did not run with its reply held")
		}
		time.Sleep(time.Millisecond) // polling the server
	}
	select {
	case err := <-answered:
		t.Fatalf("the reply came through while held: %v", err)
	default:
	}
	p.Release()
	if err := <-answered; err != nil {
		t.Fatal(err)
	}
	// The reply is written before the proxy counts it as let go.
	for deadline := time.Now().Add(5 * time.Second); p.Held() != 0; {
		if time.Now().After(deadline) {
			t.Fatalf("%d chunks still held after Release", p.Held())
		}
		time.Sleep(time.Millisecond) // polling the proxy's count
	}
	if err := c.Ping(ctx).Err(); err != nil { // replies flow again
		t.Fatal(err)
	}
}

func TestCloseEndsHeldConnections(t *testing.T) {
	srv := redistest.Start(t)
	p, err := holdproxy.Start(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Ping(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	p.Hold()
	answered := make(chan error, 1)
	go func() { answered <- c.Ping(context.Background()).Err() }()
	deadline := time.Now().Add(10 * time.Second)
	for p.Held() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no reply held")
		}
		time.Sleep(time.Millisecond) // polling the proxy
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-answered; err == nil {
		t.Fatal("a held reply was delivered after Close")
	}
}
