package fencinggrpc_test

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/fencedlock/fencedlock/fencing"
	"github.com/fencedlock/fencedlock/fencing/fencinggrpc"
	"github.com/fencedlock/fencedlock/redlock"
)

// The Go block of docs/fencing.md on gRPC, compiled here (internal/doccheck
// checks that the page shows exactly the marked lines). Example in
// example_test.go runs the same calls against a real server.

type payRequest struct{ OrderID string }

func (r *payRequest) GetOrderId() string { return r.OrderID }

type payReply struct{}

type ordersClient interface {
	Pay(ctx context.Context, req *payRequest, opts ...grpc.CallOption) (*payReply, error)
}

func grpcServer(g fencing.Guard) *grpc.Server {
	// doc block: docs/fencing.md
	// Server side: calls that name an order are fenced by it; the others pass unchecked.
	byOrder := func(ctx context.Context, method string, req any) (string, bool) {
		r, ok := req.(interface{ GetOrderId() string })
		if !ok {
			return "", false
		}
		return "order-" + r.GetOrderId(), true
	}
	srv := grpc.NewServer(
		grpc.UnaryInterceptor(fencinggrpc.UnaryServerInterceptor(g, byOrder)),
		grpc.StreamInterceptor(fencinggrpc.StreamServerInterceptor(g, byOrder)),
	)
	// end doc block
	return srv
}

func grpcClient(ctx context.Context, target string, creds credentials.TransportCredentials, newOrdersClient func(grpc.ClientConnInterface) ordersClient, lock *redlock.Lock, req *payRequest) error {
	// doc block: docs/fencing.md
	// Client side: the interceptors send the token that WithToken puts in ctx.
	cc, err := grpc.NewClient(target, grpc.WithTransportCredentials(creds),
		grpc.WithUnaryInterceptor(fencinggrpc.UnaryClientInterceptor()),
		grpc.WithStreamInterceptor(fencinggrpc.StreamClientInterceptor()))
	if err != nil {
		return err
	}
	defer cc.Close()
	orders := newOrdersClient(cc) // your generated client

	// A lease's deadline travels with the call: the server's handler stops by then.
	call, cancel := lock.Lease(fencinggrpc.WithToken(ctx, lock.Token()), 2*time.Second)
	defer cancel()
	_, err = orders.Pay(call, req) // codes.Aborted: a newer holder got there first
	// end doc block
	return err
}

var _, _ = grpcServer, grpcClient
