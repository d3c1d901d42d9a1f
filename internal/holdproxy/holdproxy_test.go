package holdproxy_test

import (
	"context"
	"errors"
	"io"
	"net"
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

func TestPartitionDropsBothWaysUntilHeal(t *testing.T) {
	srv := redistest.Start(t)
	direct := redistest.Client(t, srv)
	// A deadline of many round trips: a call that has not answered by then
	// was cut, not slow.
	wait := 100 * redistest.PingRTT(t, []redis.UniversalClient{direct})
	p, err := holdproxy.Start(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	c := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	ctx := t.Context()
	if err := c.Ping(ctx).Err(); err != nil { // connection open before the cut
		t.Fatal(err)
	}

	p.Partition()
	cut, cancel := context.WithTimeout(ctx, wait)
	err = c.Set(cut, "k", "lost", 0).Err()
	cancel()
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("SET across the partition: %v, want a timeout", err)
	}
	if n := direct.Exists(ctx, "k").Val(); n != 0 {
		t.Fatal("a request sent across the partition reached the server")
	}

	p.Heal()
	// Through the proxy: it answers again, and the request it dropped is
	// not carried out late.
	if err := c.Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET after Heal: %v, want %v", err, redis.Nil)
	}
}

// TestPartitionDropsRepliesAndHealClosesTheGappedConnection: a reply read
// from the server under a partition is dropped too, and the connection that
// lost it is closed by Heal rather than carried on with a gap in its stream.
func TestPartitionDropsRepliesAndHealClosesTheGappedConnection(t *testing.T) {
	srv := redistest.Start(t)
	wait := 100 * redistest.PingRTT(t, []redis.UniversalClient{redistest.Client(t, srv)}) // as above
	p, err := holdproxy.Start(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	raw, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = raw.Close() })

	p.Hold()
	if _, err := raw.Write([]byte("PING\r\n")); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); p.Held() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("no reply held")
		}
		time.Sleep(time.Millisecond) // polling the proxy
	}
	p.Partition()
	p.Release() // the held +PONG now meets the partition
	buf := make([]byte, 64)
	_ = raw.SetReadDeadline(time.Now().Add(wait))
	n, err := raw.Read(buf)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read across the partition: %q, %v; want a timeout", buf[:n], err)
	}

	p.Heal()
	_ = raw.SetReadDeadline(time.Now().Add(wait))
	if n, err := raw.Read(buf); !errors.Is(err, io.EOF) {
		t.Fatalf("read after Heal: %q, %v; want %v: the connection that lost a reply is closed", buf[:n], err, io.EOF)
	}
}
