package fencinggrpc_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/fencedlock/fencedlock/fencing"
	"github.com/fencedlock/fencedlock/fencing/fencinggrpc"
)

// seen is what the last call's handler found in its ctx.
type seen struct {
	mu       sync.Mutex // protects the fields below
	token    uint64
	admitted bool
	deadline time.Time
	ok       bool // deadline is set
}

func (s *seen) record(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.token, s.admitted = fencinggrpc.TokenFromContext(ctx)
	s.deadline, s.ok = ctx.Deadline()
}

func (s *seen) get() (token uint64, admitted bool, deadline time.Time, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.token, s.admitted, s.deadline, s.ok
}

// byService fences Check by its request's service name ("" is not fenced)
// and Watch by its method; List goes through unchecked.
func byService(_ context.Context, method string, req any) (string, bool) {
	switch method {
	case healthpb.Health_Check_FullMethodName:
		svc := req.(*healthpb.HealthCheckRequest).GetService()
		return svc, svc != ""
	case healthpb.Health_Watch_FullMethodName:
		return "watch", true
	}
	return "", false
}

// serve runs gRPC's health service on a loopback port behind the fencing
// interceptors and g, and returns a client whose calls carry WithToken's
// token, and what the handlers saw.
func serve(t *testing.T, g fencing.Guard) (healthpb.HealthClient, *seen) {
	t.Helper()
	s := &seen{}
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(fencinggrpc.UnaryServerInterceptor(g, byService),
			func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
				s.record(ctx) // the handler's ctx
				return h(ctx, req)
			}),
		grpc.ChainStreamInterceptor(fencinggrpc.StreamServerInterceptor(g, byService),
			func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
				s.record(ss.Context())
				return h(srv, ss)
			}),
	)
	hs := health.NewServer()
	for _, svc := range []string{"orders", "invoices"} {
		hs.SetServingStatus(svc, healthpb.HealthCheckResponse_SERVING)
	}
	healthpb.RegisterHealthServer(srv, hs)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.Stop()
		if err := <-served; err != nil {
			t.Error(err)
		}
	})
	cc, err := grpc.NewClient("passthrough:///"+lis.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(fencinggrpc.UnaryClientInterceptor()),
		grpc.WithStreamInterceptor(fencinggrpc.StreamClientInterceptor()),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return healthpb.NewHealthClient(cc), s
}

// TestUnary: calls in order on one server, as one resource's holders
// would make them: fresh and equal tokens are admitted, a stale one is
// Aborted, bad tokens are InvalidArgument, and an unfenced call goes
// through without one.
func TestUnary(t *testing.T) {
	hc, s := serve(t, fencing.NewMemory())
	for _, tc := range []struct {
		name    string
		service string
		token   uint64   // through WithToken; 0: none
		raw     []string // metadata set by hand instead
		code    codes.Code
	}{
		{"fresh", "orders", 5, nil, codes.OK},
		{"equal", "orders", 5, nil, codes.OK},
		{"stale", "orders", 4, nil, codes.Aborted},
		{"newer", "orders", 7, nil, codes.OK},
		{"other resource, lower token", "invoices", 2, nil, codes.OK},
		{"missing", "orders", 0, nil, codes.InvalidArgument},
		{"malformed", "orders", 0, []string{"seven"}, codes.InvalidArgument},
		{"zero", "orders", 0, []string{"0"}, codes.InvalidArgument},
		{"negative", "orders", 0, []string{"-7"}, codes.InvalidArgument},
		{"repeated", "orders", 0, []string{"7", "8"}, codes.InvalidArgument},
		{"plus sign", "orders", 0, []string{"+8"}, codes.InvalidArgument},
		{"leading space", "orders", 0, []string{" 8"}, codes.InvalidArgument},
		{"hex", "orders", 0, []string{"0x8"}, codes.InvalidArgument},
		{"underscore", "orders", 0, []string{"1_0"}, codes.InvalidArgument},
		{"past uint64", "orders", 0, []string{"18446744073709551616"}, codes.InvalidArgument},
		{"stale, leading zeros", "orders", 0, []string{"06"}, codes.Aborted},
		{"unfenced without a token", "", 0, nil, codes.OK},
		{"stale after the rest", "orders", 6, nil, codes.Aborted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			if tc.token != 0 {
				ctx = fencinggrpc.WithToken(ctx, tc.token)
			}
			for _, v := range tc.raw {
				ctx = metadata.AppendToOutgoingContext(ctx, fencinggrpc.MetadataKey, v)
			}
			_, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: tc.service})
			if got := status.Code(err); got != tc.code {
				t.Fatalf("code %v (%v), want %v", got, err, tc.code)
			}
			if tc.code != codes.OK {
				return
			}
			token, admitted, _, _ := s.get()
			if fenced := tc.service != ""; admitted != fenced || (fenced && token != tc.token) {
				t.Fatalf("handler saw token %d (admitted %v), want %d (fenced %v)", token, admitted, tc.token, fenced)
			}
		})
	}
}

// TestWithTokenReplacesMetadata: a token set by hand under the key is
// replaced by WithToken's, not repeated (which the server would refuse).
func TestWithTokenReplacesMetadata(t *testing.T) {
	hc, s := serve(t, fencing.NewMemory())
	ctx := metadata.AppendToOutgoingContext(t.Context(), fencinggrpc.MetadataKey, "3")
	ctx = fencinggrpc.WithToken(ctx, 9)
	if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "orders"}); err != nil {
		t.Fatal(err)
	}
	if token, _, _, _ := s.get(); token != 9 {
		t.Fatalf("admitted %d, want 9", token)
	}
}

// TestStream: a stream is admitted once, when it opens; a stale token
// ends it with Aborted before any message.
func TestStream(t *testing.T) {
	hc, s := serve(t, fencing.NewMemory())
	for _, tc := range []struct {
		name  string
		token uint64
		code  codes.Code
	}{
		{"fresh", 3, codes.OK},
		{"stale", 2, codes.Aborted},
		{"missing", 0, codes.InvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if tc.token != 0 {
				ctx = fencinggrpc.WithToken(ctx, tc.token)
			}
			stream, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{Service: "orders"})
			if err != nil {
				t.Fatal(err)
			}
			_, err = stream.Recv()
			if got := status.Code(err); got != tc.code {
				t.Fatalf("code %v (%v), want %v", got, err, tc.code)
			}
			if tc.code != codes.OK {
				return
			}
			if token, admitted, _, _ := s.get(); !admitted || token != tc.token {
				t.Fatalf("handler saw token %d (admitted %v), want %d", token, admitted, tc.token)
			}
		})
	}
}

// failing is a guard whose storage is down.
type failing struct{}

func (failing) Admit(context.Context, string, uint64) error {
	return errors.New("dial tcp: connection refused")
}

// TestGuardFailure: a guard that fails is Unavailable, and its error is
// not shown to the caller.
func TestGuardFailure(t *testing.T) {
	hc, _ := serve(t, failing{})
	_, err := hc.Check(fencinggrpc.WithToken(t.Context(), 1), &healthpb.HealthCheckRequest{Service: "orders"})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("code %v (%v), want Unavailable", status.Code(err), err)
	}
	if msg := status.Convert(err).Message(); msg != "fencing guard unavailable" {
		t.Fatalf("message %q shows the storage's error", msg)
	}
}
