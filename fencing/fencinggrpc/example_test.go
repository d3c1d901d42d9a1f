package fencinggrpc_test

import (
	"context"
	"fmt"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/fencedlock/fencedlock/fencing"
	"github.com/fencedlock/fencedlock/fencing/fencinggrpc"
)

func Example() {
	// Server side: every Check of a named service is fenced by that name.
	resource := func(_ context.Context, method string, req any) (string, bool) {
		if method != healthpb.Health_Check_FullMethodName {
			return "", false // not fenced
		}
		svc := req.(*healthpb.HealthCheckRequest).GetService()
		return svc, svc != ""
	}
	guard := fencing.NewMemory()
	srv := grpc.NewServer(
		grpc.UnaryInterceptor(fencinggrpc.UnaryServerInterceptor(guard, resource)),
		grpc.StreamInterceptor(fencinggrpc.StreamServerInterceptor(guard, resource)),
	)
	hs := health.NewServer()
	hs.SetServingStatus("orders", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go srv.Serve(lis)
	defer srv.Stop()

	// Client side: the interceptors send the token that WithToken puts in ctx.
	cc, err := grpc.NewClient("passthrough:///"+lis.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(fencinggrpc.UnaryClientInterceptor()),
		grpc.WithStreamInterceptor(fencinggrpc.StreamClientInterceptor()),
	)
	if err != nil {
		panic(err)
	}
	defer cc.Close()
	client := healthpb.NewHealthClient(cc)
	ctx := context.Background()

	for _, token := range []uint64{7, 6} { // a holder, then a former one
		_, err := client.Check(fencinggrpc.WithToken(ctx, token), &healthpb.HealthCheckRequest{Service: "orders"})
		fmt.Printf("token %d: %v\n", token, status.Code(err))
	}
	// Output:
	// token 7: OK
	// token 6: Aborted
}
