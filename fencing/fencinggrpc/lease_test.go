package fencinggrpc_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/fencedlock/fencedlock/fencing"
	"github.com/fencedlock/fencedlock/fencing/fencinggrpc"
	"github.com/fencedlock/fencedlock/internal/redistest"
	"github.com/fencedlock/fencedlock/redlock"
)

// TestLeaseDeadlineReachesTheHandler: a call made with a redlock lease
// carries its deadline to the server (gRPC sends the time left), whose
// handler's ctx ends no earlier than the lease and no later than the
// lease plus the call's own time on the wire, and the hold's token is
// admitted.
func TestLeaseDeadlineReachesTheHandler(t *testing.T) {
	var nodes []redis.UniversalClient
	for _, p := range redistest.StartN(t, 3) {
		n := redis.NewClient(&redis.Options{Addr: p.Addr()})
		t.Cleanup(func() { _ = n.Close() })
		nodes = append(nodes, n)
	}
	locks, err := redlock.New(nodes, redlock.WithNodeTimeout(max(100*redistest.PingRTT(t, nodes), 50*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = locks.Close() })
	hc, s := serve(t, fencing.NewMemory())

	err = locks.Do(t.Context(), "orders", 10*time.Second, func(ctx context.Context, l *redlock.Lock) error {
		call, cancel := l.Lease(fencinggrpc.WithToken(ctx, l.Token()), time.Second)
		defer cancel()
		want, _ := call.Deadline()
		start := time.Now()
		if _, err := hc.Check(call, &healthpb.HealthCheckRequest{Service: "orders"}); err != nil {
			return err
		}
		took := time.Since(start)
		token, admitted, got, ok := s.get()
		if !ok {
			t.Fatal("the handler's ctx has no deadline")
		}
		// The time left travels in the coarsest unit that keeps 8 digits,
		// rounded up: a microsecond for what is under 100 s.
		if hi := want.Add(took + time.Microsecond); got.Before(want) || got.After(hi) {
			t.Fatalf("handler's deadline %v, want in [%v, %v]", got, want, hi)
		}
		if !admitted || token != l.Token() {
			t.Fatalf("handler saw token %d (admitted %v), want %d", token, admitted, l.Token())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
